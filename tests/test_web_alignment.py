"""The status page's numbers sit under their headers (issue 30): numeric cells are right-aligned
(``td.num``), and so must their column's header be -- it was left-aligned, so in "NameServers
compared" a peer's 31 topics read as 31 under **Error**. Every table of the page is checked:
a column's header is ``num`` exactly when its cells are, and the style sheet right-aligns
``th.num`` as it does ``td.num``."""
import re
from html.parser import HTMLParser

from twisted.trial.unittest import SynchronousTestCase
from twisted.web.template import flatten

from rocketpy.namesrv.consistency import NamesrvView, compare_views
from rocketpy.web import page
from rocketpy.web.peers import report_of

from test_web_pages import Server


class _Tables(HTMLParser):
    """Every table: its header cells' classes and each body row's cells' classes."""

    def __init__(self):
        super().__init__()
        self.tables, self._open = [], []

    def handle_starttag(self, tag, attrs):
        classes = set((dict(attrs).get("class") or "").split())
        if tag == "table":
            self._open.append({"head": [], "rows": []})
            self.tables.append(self._open[-1])
        elif not self._open:
            return
        elif tag == "tr":
            self._open[-1]["rows"].append([])
        elif tag == "th":
            self._open[-1]["head"].append(classes)
        elif tag == "td":
            self._open[-1]["rows"][-1].append(classes)

    def handle_endtag(self, tag):
        if tag == "table" and self._open:
            self._open.pop()


def _misaligned(html):
    """``[(header classes, cell classes, column)]`` of every column whose header and cells
    disagree on ``num``; and the number of numeric columns seen."""
    parser = _Tables()
    parser.feed(html)
    wrong, numeric = [], 0
    for table in parser.tables:
        for row in (r for r in table["rows"] if r):
            for column, (head, cell) in enumerate(zip(table["head"], row)):
                numeric += "num" in cell
                if ("num" in head) != ("num" in cell):
                    wrong.append((sorted(head), sorted(cell), column))
    return wrong, numeric


def _flat(element):
    out = []
    flatten(None, element, out.append)
    return b"".join(out).decode()


class AlignmentTests(SynchronousTestCase):

    def test_the_style_sheet_right_aligns_numeric_headers(self):
        rules = {selector.strip(): body for selectors, body in re.findall(r"([^{}]+)\{([^}]*)\}", page._CSS)
                 for selector in selectors.split(",")}
        self.assertIn("text-align:right", rules.get("th.num", ""))
        self.assertEqual(rules["th.num"], rules["td.num"])

    def test_peer_table_numbers_are_under_their_headers(self):
        read = NamesrvView("10.0.0.1:9876", topics=dict.fromkeys(f"T{i}" for i in range(31)))
        gone = NamesrvView("10.0.0.2:9876", error="connect failed")
        report = report_of(compare_views([read, NamesrvView("10.0.0.3:9876"), gone]))
        html = _flat(page._peers(dict(report, intervalSeconds=30)))
        wrong, numeric = _misaligned(html)
        self.assertEqual(wrong, [])
        self.assertGreaterEqual(numeric, 6)   # broker groups and topics, three rows

    def test_every_table_of_the_page_has_its_numbers_under_their_headers(self):
        server = Server(self)
        proto = server.connect(41000)
        server.register(proto, "C1", "broker-a", 0, "10.0.0.1:10911", ["TopicA", "TopicB"])
        server.register(server.connect(41001), "C1", "broker-a", 1, "10.0.0.2:10911", [])
        server.call(proto, 105, {"topic": "TopicA"})   # a request of the last minute
        server.reactor.advance(2)
        status, _, html = server.get("/?per=1000")
        self.assertEqual(status, 200)
        wrong, numeric = _misaligned(html.decode())
        self.assertEqual(wrong, [])
        self.assertGreaterEqual(numeric, 6 + 2 * 4 + 2)   # cluster row, two brokers, traffic
