"""The accessibility check of the browser tests: axe-core (Deque's engine, vendored from its npm
package in tests/browser/vendor/axe-core with its licence; static/vendor/refresh.sh updates it)
run in the page against WCAG 2.x A and AA.

Playwright evaluates the script over the DevTools protocol, which the page's
Content-Security-Policy does not govern: the check needs no exception in the policy.
"""

from pathlib import Path

AXE = Path(__file__).parent / "vendor" / "axe-core" / "axe.min.js"
RULES = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa", "best-practice"]

RUN = """async (tags) => {
  const result = await axe.run(document, { runOnly: { type: "tag", values: tags } });
  return result.violations.map((v) => ({
    id: v.id,
    impact: v.impact,
    help: v.help,
    nodes: v.nodes.slice(0, 5).map((n) => n.target.join(" ") + ": " + n.failureSummary),
  }));
}"""


SWAGGER_UI_MARKUP = frozenset(
    {
        "landmark-main-is-top-level",
        "landmark-no-duplicate-main",
        "landmark-unique",
        "heading-order",
        "nested-interactive",
    }
)
"""What the vendored Swagger UI's own markup breaks on /api/v1/docs, which no stylesheet can
mend: it renders a second <main> inside the page's, an <h3> under the page's <h1>, and each
operation's summary as a <button> holding a link. Every other rule holds there."""


def violations(page, waived: frozenset[str] = frozenset()) -> list[dict]:
    """What axe finds wrong with the page as it is now (empty: nothing), but the `waived`
    rules."""
    if not page.evaluate("typeof axe !== 'undefined'"):
        page.evaluate(AXE.read_text())
    return [found for found in page.evaluate(RUN, RULES) if found["id"] not in waived]
