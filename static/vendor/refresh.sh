#!/bin/sh
# Re-fetch the vendored front-end libraries at their pinned versions (no CDN at run time):
# uPlot for the pages, and axe-core for the browser tests' accessibility check (only the tests
# load it: tests/browser/vendor/, never served).
# Run from anywhere: `static/vendor/refresh.sh`. Needs npm (registry access) and sha1sum.
# To upgrade, change the version and its sha1 (`npm view uplot@X dist.shasum`), run, commit.
set -eu

UPLOT_VERSION=1.6.32
UPLOT_SHA1=c800a63b432bad692d6d746f44f0882aa73a49ae
AXE_VERSION=4.14.1
AXE_SHA1=14d8a6f3f085afd126b8b5ca1e42e50e17fb1d99

here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cd "$work"
tarball=$(npm pack --silent "uplot@$UPLOT_VERSION")
echo "$UPLOT_SHA1  $tarball" | sha1sum -c -
tar xzf "$tarball"
mkdir -p "$here/uplot"
cp package/dist/uPlot.iife.min.js package/dist/uPlot.min.css package/LICENSE "$here/uplot/"
echo "$UPLOT_VERSION" > "$here/uplot/VERSION"
echo "uPlot $UPLOT_VERSION -> $here/uplot/"

rm -rf package
tarball=$(npm pack --silent "axe-core@$AXE_VERSION")
echo "$AXE_SHA1  $tarball" | sha1sum -c -
tar xzf "$tarball"
axe=$(cd "$here/../.." && pwd)/tests/browser/vendor/axe-core
mkdir -p "$axe"
cp package/axe.min.js package/LICENSE package/LICENSE-3RD-PARTY.txt "$axe/"
echo "$AXE_VERSION" > "$axe/VERSION"
echo "axe-core $AXE_VERSION -> $axe/"
