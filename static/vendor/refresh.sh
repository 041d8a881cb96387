#!/bin/sh
# Re-fetch the vendored front-end libraries at their pinned versions (no CDN at run time).
# Run from anywhere: `static/vendor/refresh.sh`. Needs npm (registry access) and sha1sum.
# To upgrade, change the version and its sha1 (`npm view uplot@X dist.shasum`), run, commit.
set -eu

UPLOT_VERSION=1.6.32
UPLOT_SHA1=c800a63b432bad692d6d746f44f0882aa73a49ae

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
