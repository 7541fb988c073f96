#!/bin/sh
# Build step of dotnet-asyncfastcgi: sh build.sh OUT_DIR
#
# AsyncFastCGI.NET was not on NuGet when the seed ran (its install.sh clones it from GitHub
# master); nothing of it is vendored here. This script clones it into OUT_DIR/src, checks
# out commit 5a58529 (the lib/ the seed's results were measured with, see
# /work/shared/studies.md 3.4), copies lib/*.cs beside the seed's main.cs and the project
# file, and publishes a Release build to OUT_DIR/out. Needs git, the .NET SDK (dotnet) and
# internet access to github.com and the NuGet feed.
#
# Environment: ASYNCFASTCGI_REPO (the clone URL), ASYNCFASTCGI_COMMIT, TARGET_FRAMEWORK (net8.0).
set -eu
out="${1:?usage: sh build.sh OUT_DIR}"
here="$(cd "$(dirname "$0")" && pwd)"
repo="${ASYNCFASTCGI_REPO:-https://github.com/bolner/AsyncFastCGI.NET.git}"
commit="${ASYNCFASTCGI_COMMIT:-5a58529afc3a197a011304e0048d6383efc3be2d}"
command -v git >/dev/null || { echo "build.sh: git is needed to fetch AsyncFastCGI.NET" >&2; exit 127; }
rm -rf "$out/src" "$out/out"
mkdir -p "$out/src"
git clone --quiet "$repo" "$out/src/AsyncFastCGI.NET"
git -C "$out/src/AsyncFastCGI.NET" checkout --quiet "$commit"
echo "AsyncFastCGI.NET $(git -C "$out/src/AsyncFastCGI.NET" rev-parse HEAD)"
mkdir -p "$out/src/app"
cp "$here/main.cs" "$here/AsyncFastCGI.csproj" "$out/src/app/"
cp -r "$out/src/AsyncFastCGI.NET/lib" "$out/src/app/lib"
dotnet publish "$out/src/app/AsyncFastCGI.csproj" -c Release -o "$out/out" \
    -p:TargetFramework="${TARGET_FRAMEWORK:-net8.0}"
