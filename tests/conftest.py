"""Fixtures for every test."""

import pytest


@pytest.fixture(autouse=True)
def kernel_cache_in_tmp(tmp_path_factory, monkeypatch):
    """Tests never write to the user's kernel cache: each session uses one temporary directory."""
    monkeypatch.setenv("GRAPHOPT_KERNEL_CACHE", str(tmp_path_factory.getbasetemp() / "kernel-cache"))
