"""The documents a finance team files for an invoice: CSV, XLSX (a 增值税发票 request) and
PDF. ``rows`` reads the invoice once; each format only lays those rows out."""


def document_language(language: str | None) -> str:
    """The language a document is rendered in: Chinese for any zh request, else English."""
    return "zh-hans" if (language or "").lower().startswith("zh") else "en"
