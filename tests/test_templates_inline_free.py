"""kvadmin's own pages run no inline code: every script and style is a static file from this
origin, so the Content-Security-Policy's script-src 'self' holds without exceptions for them
(the nonce in the policy is for Django's admin templates)."""

import re

from tests.conftest import ROOT

INLINE = re.compile(r"<script(?![^>]*\bsrc=)[^>]*>|<style\b|\son[a-z]+=|\bhx-on", re.IGNORECASE)


def test_no_template_has_inline_scripts_styles_or_handlers() -> None:
    found = {
        str(path.relative_to(ROOT)): INLINE.findall(path.read_text())
        for path in (ROOT / "templates").rglob("*.html")
    }
    assert not {name: hits for name, hits in found.items() if hits}
