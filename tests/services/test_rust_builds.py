"""The Rust services' local builds share one Cargo target folder (``{cargo_target_dir}``), so a
crate that two services lock at the same version is compiled once per profile, not once per
service: every Rust service builds there, runs its binary from there, and no two services
(or profiles) name the same binary, so no build overwrites another's."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchlib.runtime.base import placeholder_values
from benchlib.runtime.manifest import find_services_dir, load_manifest


def _rust_variants() -> list[tuple[str, str, tuple[str, ...], tuple[str, ...]]]:
    """(service, variant, build command, run command) of every variant of every cargo service."""
    out = []
    for toml in sorted(find_services_dir().glob("*/service.toml")):
        m = load_manifest(toml.parent)
        if "cargo" not in m.toolchains:
            continue
        for variant in m.variants:
            r = m.resolve(variant)
            assert r.build_command is not None, f"{m.name} ({variant}) has no build command"
            out.append((m.name, variant, tuple(r.build_command), tuple(r.run_command)))
    return out


def test_every_rust_service_builds_into_the_shared_target_folder_under_a_binary_name_of_its_own() -> None:
    variants = _rust_variants()
    assert {"rust-actix-logger", "rust-actix-random", "rust-rocket-mongo", "rust-tonic-axum"} <= {v[0] for v in variants}
    owner: dict[str, str] = {}
    for name, variant, build, run in variants:
        assert build[build.index("--target-dir") + 1] == "{cargo_target_dir}", (name, variant, build)
        binary = run[0]
        profile = "release" if "--release" in build else "debug"
        assert binary.startswith(f"{{cargo_target_dir}}/{profile}/"), (name, variant, binary)
        assert owner.setdefault(binary, name) == name, f"{name} and {owner[binary]} both build {binary}"


def test_the_shared_target_folder_is_one_folder_of_the_build_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BENCHLIB_CACHE", str(tmp_path))
    services = find_services_dir()
    a = placeholder_values(load_manifest(services / "rust-actix-logger").resolve("fair"), build_dir=tmp_path / "a", port=None)
    b = placeholder_values(load_manifest(services / "rust-actix-random").resolve(), build_dir=tmp_path / "b", port=None)
    assert a["cargo_target_dir"] == b["cargo_target_dir"] == str(tmp_path / "cargo-target")
    assert (tmp_path / "cargo-target").is_dir()
