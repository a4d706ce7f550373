from pathlib import Path

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def fixture_text(tool: str, name: str) -> str:
    return (FIXTURES / tool / name).read_text(encoding="utf-8")
