"""What a provider is given of a configured source: typed values, secrets already resolved.

The reconciler builds one from its configuration (``reconciler.sources``); connectors never read
the configuration or the environment themselves.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SourceOptions:
    name: str
    kind: str
    base_url: str | None = None
    api_key: str | None = None  # the secret itself (from the variable named by api_key_env)
    api_key_env: str | None = None  # its variable's name, for error messages
    private_key: str | None = None
    private_key_env: str | None = None
    tolerance_seconds: int = 300
    retention_days: float | None = None
    page_size: int | None = None
    # Stripe
    event_types: tuple[str, ...] = ()
    account: str | None = None
    # GitHub
    repository: str | None = None
    organization: str | None = None
    hook_id: int | None = None
    app_id: int | None = None
    # Shopify
    api_version: str = "2025-01"
    resources: tuple[str, ...] = ("orders",)
    # generic signatures and identity
    signature_header: str | None = None
    signature_algorithm: str = "sha256"
    signature_encoding: str = "hex"
    signature_prefix: str = ""
    id_header: str | None = None
    id_json_path: str | None = None
    type_header: str | None = None
    type_json_path: str | None = None
    # generic list APIs (and Standard Webhooks senders that have one)
    list_url: str | None = None
    items_path: str = "data"
    id_path: str = "id"
    type_path: str | None = None
    time_path: str | None = None
    object_id_path: str | None = None
    cursor_style: str = "link"
    cursor_param: str = "cursor"
    cursor_path: str | None = None
    done_path: str | None = None
    since_param: str = "since"
    limit_param: str = "limit"

    def hint(self) -> str:
        """Where the credentials come from, for an authentication error."""
        return f"the key in ${self.api_key_env}" if self.api_key_env else "the credentials"

    def require_api_key(self) -> str:
        from connectors.errors import ConfigError

        if not self.api_key:
            raise ConfigError(f"source '{self.name}': no api_key_env is configured")
        return self.api_key
