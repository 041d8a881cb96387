#!/bin/sh
# Re-fetch the vendored front-end libraries at their pinned versions (no CDN at run time):
# uPlot for the pages, and axe-core for the browser tests' accessibility check (only the tests
# load it: tests/browser/vendor/, never served).
# Run from anywhere: `static/vendor/refresh.sh`. Needs npm (registry access) and sha1sum.
# To upgrade, change the version and its sha1 (`npm view uplot@X dist.shasum`), run, commit.
set -eu

UPLOT_VERSION=1.6.32
UPLOT_SHA1=c800a63b432bad692d6d746f44f0882aa73a49ae
# Swagger UI renders /api/v1/openapi.json at /api/v1/docs (Apache-2.0: LICENSE and NOTICE kept).
SWAGGER_UI_VERSION=5.35.0
SWAGGER_UI_SHA1=5c3b487ae5a2121b2c668d6f92b550707521876a
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
tarball=$(npm pack --silent "swagger-ui-dist@$SWAGGER_UI_VERSION")
echo "$SWAGGER_UI_SHA1  $tarball" | sha1sum -c -
tar xzf "$tarball"
mkdir -p "$here/swagger-ui"
cp package/swagger-ui-bundle.js package/swagger-ui-bundle.js.LICENSE.txt package/swagger-ui.css \
  package/LICENSE package/NOTICE "$here/swagger-ui/"
echo "$SWAGGER_UI_VERSION" > "$here/swagger-ui/VERSION"
echo "Swagger UI $SWAGGER_UI_VERSION -> $here/swagger-ui/"

tarball=$(npm pack --silent "axe-core@$AXE_VERSION")
echo "$AXE_SHA1  $tarball" | sha1sum -c -
tar xzf "$tarball"
axe=$(cd "$here/../.." && pwd)/tests/browser/vendor/axe-core
mkdir -p "$axe"
cp package/axe.min.js package/LICENSE package/LICENSE-3RD-PARTY.txt "$axe/"
echo "$AXE_VERSION" > "$axe/VERSION"
echo "axe-core $AXE_VERSION -> $axe/"
