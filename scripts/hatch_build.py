"""Hatch build hook: put ``storage/`` and ``configs/default.toml`` inside the wheel.

Only for regular wheels: an editable install reads them from the checkout, and forcing them into an
editable wheel would leave a stray ``batchcrawl/`` namespace folder in site-packages.
"""

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


class StorageHook(BuildHookInterface):
    """Adds the storage contract and the default config to standard wheels."""

    def initialize(self, version, build_data):
        if version == "standard":
            build_data["force_include"]["storage"] = "batchcrawl/_storage"
            build_data["force_include"]["configs/default.toml"] = "batchcrawl/_configs/default.toml"
