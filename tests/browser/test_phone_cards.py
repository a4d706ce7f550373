"""Tables of figures on a phone, and the invoice on paper (issue 33 items 3 and 5).

At 390 px the invoice's lines and totals, the SLA report and month-by-month tables and the
tenant and fleet overviews are cards (portal/static/portal/site.css, ``table.cards``): every
cell that holds a figure lies inside the screen, after its column's name, and the page
never scrolls sideways; at 1440 px they are still tables with their header row. Printed,
the invoice page shows no navigation, buttons or download links, and its totals once,
together on one page, however many pages its lines take.

Hand-checked figures: the world of test_design.py has October's draft invoice, node rent
¥45,000.00 + network fee ¥22,000.00 = ¥67,000.00, 6 % tax ¥4,020.00, total ¥71,020.00.
The printed invoice has 60 lines of ¥1,000.00: subtotal ¥60,000.00, tax ¥3,600.00, total
¥63,600.00.
"""

import io
import re
from decimal import Decimal

import pytest
from django.conf import settings
from django.db import transaction
from pypdf import PdfReader

from accounts.choices import Role
from billing.choices import LineKind
from billing.models import Invoice
from tests.browser.test_design import WIDTHS, world  # noqa: F401  (a fixture, used below)
from tests.factories import MembershipFactory, at
from tests.portal.support import month_line

# (page, table) for every table of figures: the pages are the world's.
TABLES = [
    ("invoice", "table.invoice-lines"),
    ("lease-sla", "table.report"),
    ("lease-sla", "table.months"),
    ("lease", "table.report"),
    ("overview", "table.leases"),
    ("fleet", "table#fleet"),
]
# The labels a phone shows before the invoice line's amount and the SLA month's credit.
AMOUNT_LABEL = {"en": "amount (¥)", "zh-hans": "金额（元）"}  # noqa: RUF001
CREDIT_LABEL = {"en": "SLA credit", "zh-hans": "SLA 赔付"}

# Every body and footer cell of the table with a digit in it: its text, its box and the box
# of its text (a cell may be inside the screen while its text overflows it), its label, and
# any amount in it that wraps onto a second line.
FIGURE_CELLS = r"""(selector) => {
    const table = document.querySelector(selector);
    if (!table) return null;
    const cells = [...table.querySelectorAll('tbody td, tbody th, tfoot td, tfoot th')]
        .filter(cell => /[0-9]/.test(cell.textContent));
    return {
        display: getComputedStyle(table).display,
        head: table.tHead ? getComputedStyle(table.tHead).display : null,
        headWidth: table.tHead ? table.tHead.getBoundingClientRect().width : null,
        cells: cells.map(cell => {
            const box = cell.getBoundingClientRect();
            const range = document.createRange();
            range.selectNodeContents(cell);
            const text = range.getBoundingClientRect();
            // An amount broken over two lines ("¥4,020.0" / "0") reads as another amount.
            const split = [];
            const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
            for (let node = walker.nextNode(); node; node = walker.nextNode()) {
                for (const match of node.data.matchAll(/¥-?[0-9][0-9,]*(\.[0-9]+)?/g)) {
                    const piece = document.createRange();
                    piece.setStart(node, match.index);
                    piece.setEnd(node, match.index + match[0].length);
                    const tops = new Set([...piece.getClientRects()].map(r => Math.round(r.top)));
                    if (tops.size > 1) split.push(match[0]);
                }
            }
            const before = getComputedStyle(cell, '::before');
            return {
                text: cell.textContent.replace(/\s+/g, ' ').trim(),
                label: cell.dataset.label || null,
                shown: before.content,
                box: [box.left, box.right, box.width, box.height],
                textBox: [text.left, text.right],
                split: split,
            };
        }),
    };
}"""


def use_language(page, live_server, language: str) -> None:  # type: ignore[no-untyped-def]
    page.context.add_cookies(
        [{"name": settings.LANGUAGE_COOKIE_NAME, "value": language, "url": live_server.url}]
    )


def read_tables(page, pages, width, screenshot, language):  # type: ignore[no-untyped-def]
    """Each table of TABLES as FIGURE_CELLS reads it, and how far each page scrolls sideways;
    a screenshot of each page."""
    found = {}
    for name, selector in TABLES:
        if name not in pages:
            continue
        response = page.goto(pages[name])
        assert response is not None and response.status == 200, name
        screenshot(f"{name}-{width}-{language}")
        table = page.evaluate(FIGURE_CELLS, selector)
        assert table is not None, f"{name}: no {selector}"
        table["overflow"] = page.evaluate("document.documentElement.scrollWidth") - width
        found[f"{name} {selector}"] = table
    return found


def off_screen(tables: dict[str, dict], width: int) -> list[str]:  # type: ignore[type-arg]
    problems = []
    for key, table in tables.items():
        if table["overflow"] > 0:
            problems.append(f"{key}: the page scrolls sideways by {table['overflow']} px")
        for cell in table["cells"]:
            left, right, box_width, height = cell["box"]
            text_left, text_right = cell["textBox"]
            inside = left >= -0.5 and right <= width + 0.5 and box_width > 0 and height > 0
            if not inside or text_left < -0.5 or text_right > width + 0.5:
                problems.append(f"{key}: {cell['text']!r} at {left:.0f}..{right:.0f} px")
            problems.extend(f"{key}: {amount} broken over lines" for amount in cell["split"])
    return problems


@pytest.mark.parametrize("language", ["en", "zh-hans"])
def test_every_figure_is_on_a_phones_screen_and_the_desktop_keeps_its_tables(
    page,
    live_server,
    log_in,
    screenshot,
    world,  # noqa: F811  (test_design.py's fixture)
    language,
):
    user, customer_pages, staff, provider_pages = world
    use_language(page, live_server, language)
    log_in(user)
    phone, desktop = WIDTHS["phone"], WIDTHS["desktop"]

    page.set_viewport_size({"width": phone, "height": 900})
    cards = read_tables(page, customer_pages, phone, screenshot, language)
    assert off_screen(cards, phone) == []
    for key, table in cards.items():
        assert table["display"] == "block", key
        assert table["headWidth"] in (None, 1), key  # left for screen readers, 1 px
        for cell in table["cells"]:
            if cell["label"]:  # the column's name is shown before the value
                assert cell["shown"] == f'"{cell["label"]}"', (key, cell)
    lines = cards["invoice table.invoice-lines"]["cells"]
    # 2 lines of 7 cells, each with a figure (position, ZY-2026-301, "2 nodes", 1 month, the
    # price, 6.00, the amount), then subtotal, the 6 % group (its heading and its tax), the
    # tax and the total.
    assert len(lines) == 2 * 7 + 5
    texts = [cell["text"] for cell in lines]
    for figure in ("¥45,000.00", "¥22,000.00", "¥67,000.00", "¥4,020.00", "¥71,020.00"):
        assert figure in texts, figure
    amounts = [cell["text"] for cell in lines if cell["label"] == AMOUNT_LABEL[language]]
    assert amounts == ["¥45,000.00", "¥22,000.00"]
    months = cards["lease-sla table.months"]["cells"]
    assert CREDIT_LABEL[language] in {cell["label"] for cell in months}
    assert len(cards["overview table.leases"]["cells"]) >= 5
    assert len(cards["lease-sla table.report"]["cells"]) >= 4

    page.set_viewport_size({"width": desktop, "height": 900})
    tables = read_tables(page, customer_pages, desktop, screenshot, language)
    assert off_screen(tables, desktop) == []
    for key, table in tables.items():
        assert table["display"] == "table", key
        assert table["head"] in (None, "table-header-group") and table["headWidth"] != 1, key
        assert {cell["shown"] for cell in table["cells"]} == {"none"}, key  # no labels
    assert [c["text"] for c in tables["invoice table.invoice-lines"]["cells"]] == texts

    page.context.clear_cookies()
    use_language(page, live_server, language)
    log_in(staff)
    for width, display in ((phone, "block"), (desktop, "table")):
        page.set_viewport_size({"width": width, "height": 900})
        fleet = read_tables(page, provider_pages, width, screenshot, language)
        assert off_screen(fleet, width) == []
        assert fleet["fleet table#fleet"]["display"] == display
        assert len(fleet["fleet table#fleet"]["cells"]) >= 4


@pytest.fixture
def long_invoice():  # type: ignore[no-untyped-def]
    """60 lines of ¥1,000.00 at 6 %: more than a printed page holds."""
    member = MembershipFactory(role=Role.ADMIN)
    with transaction.atomic():
        invoice = Invoice.objects.create(
            tenant=member.tenant,
            period="2026-10",
            period_start=at("2026-10-01 00:00"),
            period_end=at("2026-11-01 00:00"),
            subtotal=Decimal("60000.00"),
            tax=Decimal("3600.00"),
            total=Decimal("63600.00"),
            tax_rate_percent=Decimal("6.00"),
        )
        for position in range(1, 61):
            month_line(
                invoice, position, None, LineKind.ADJUSTMENT, f"rack {position}", Decimal("1000")
            )
    return member.user, invoice


def test_the_printed_invoice_has_no_navigation_and_its_totals_once_on_one_page(
    page, live_server, log_in, long_invoice
):
    user, invoice = long_invoice
    log_in(user)
    page.set_viewport_size({"width": WIDTHS["desktop"], "height": 900})
    page.goto(f"/invoices/{invoice.pk}/")
    assert page.locator("header.site nav").is_visible()
    assert page.get_by_text("Download PDF").is_visible()

    page.emulate_media(media="print")
    assert not page.locator("header.site").is_visible()
    assert not page.get_by_text("Download PDF").is_visible()
    assert page.locator("button:visible").count() == 0
    assert page.locator("tfoot.totals:visible").count() == 1
    assert page.locator("tfoot.totals").evaluate("t => getComputedStyle(t).breakInside") == (
        "avoid"
    )

    printed = PdfReader(io.BytesIO(page.pdf(format="A4")))
    texts = [sheet.extract_text() for sheet in printed.pages]
    everything = "\n".join(texts)
    assert len(texts) >= 2  # the lines run over pages
    for word in ("Log out", "Tokens", "Download PDF", "Download CSV", "Switch"):
        assert word not in everything, word
    # The header row on every page, as the PDF repeats it; the totals once, on the last page,
    # each figure beside its label.
    assert all("unit price (¥)" in text for text in texts)
    totals = [n for n, text in enumerate(texts) if re.search(r"(?<!sub)total \(¥\)", text)]
    assert totals == [len(texts) - 1]
    assert len(re.findall(r"(?<!sub)total \(¥\)", everything)) == 1
    assert everything.count("subtotal (¥)") == 1
    last = texts[-1]
    for figure in ("¥60,000.00", "¥3,600.00", "¥63,600.00"):
        assert figure in last, figure
    assert everything.count("¥63,600.00") == 1
