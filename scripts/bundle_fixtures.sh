#!/usr/bin/env bash
# The test fixtures into a GPU bundle (scripts/cuda_bundle.sh leaves them out: the GPU machine's transfer
# carries the checkout beside the bundle, 64 MiB in all): this checkout's tests/fixtures
# copied to BUNDLE/source/tests/, then checked against BUNDLE/fixtures.sha256, the sums of the
# bundle's commit's. Fixtures that moved since are taken out again, and the exit status is 2.
#   scripts/bundle_fixtures.sh BUNDLE
set -euo pipefail
cd "$(dirname "$0")/.."
bundle=${1:?scripts/bundle_fixtures.sh BUNDLE}
[ -f "$bundle/fixtures.sha256" ] || {
  echo "bundle_fixtures: $bundle has no fixtures.sha256: build the bundle again (scripts/cuda_build.sh --no-test --bundle $bundle)" >&2
  exit 2
}
cp -r tests/fixtures "$bundle/source/tests/"
(cd "$bundle/source/tests" && sha256sum --quiet -c ../../fixtures.sha256) || {
  rm -rf "$bundle/source/tests/fixtures"
  echo "bundle_fixtures: this checkout's tests/fixtures differ from the bundle's commit's: build the bundle again" \
    "(scripts/cuda_build.sh --no-test --bundle $bundle)" >&2
  exit 2
}
