"""The demo's workspace: its configuration (SQLite, the sandbox, one source per provider with the
business checks, the outbox's stand-in mailer) and the environment file with its credentials."""

from __future__ import annotations

from pathlib import Path

from connectors.sandbox.world import TWILIO_ACCOUNT
from reconciler.demo.listed import listed_config, listed_env

# Demo credentials: not secrets (the sandbox accepts only these), still passed through the
# environment like real ones, so the config file has none.
DEMO_ENV = {
    "HOOKLEDGER_DEMO_STRIPE_SECRET": "whsec_demo_stripe_signing_secret",
    "HOOKLEDGER_DEMO_GITHUB_SECRET": "demo-github-webhook-secret",
    "HOOKLEDGER_DEMO_SHOPIFY_SECRET": "demo-shopify-webhook-secret",
    "HOOKLEDGER_DEMO_STRIPE_KEY": "sk_test_sandbox",
    "HOOKLEDGER_DEMO_GITHUB_TOKEN": "ghp_sandbox",
    "HOOKLEDGER_DEMO_SHOPIFY_TOKEN": "shpat_sandbox",
    "HOOKLEDGER_DEMO_SLACK_SECRET": "demo-slack-signing-secret",
    "HOOKLEDGER_DEMO_TWILIO_TOKEN": "sandbox-twilio-auth-token",
    # the outbox signs the receipts it sends to the demo's stand-in mailer (Standard Webhooks)
    "HOOKLEDGER_DEMO_MAILER_SECRET": "whsec_aG9va2xlZGdlci1kZW1vLW1haWxlci1zZWNyZXQtMzI=",
    # hookledger signs the notifications it sends to the demo's stand-in ops channel
    "HOOKLEDGER_DEMO_NOTIFY_SECRET": "whsec_aG9va2xlZGdlci1kZW1vLW9wcy1jaGFubmVsLXNlY3JldA==",
    **listed_env(),
}

CONFIG = """\
# hookledger demo workspace, written by `hookledger demo`. Every command works on it:
#   set -a; . {dir}/demo.env; set +a
#   hookledger dashboard --config {dir}/config.toml
# (reconcile, backfill, `worker` and `publish` need the demo running: the sandbox provider and the
# stand-in mailer live in it)

[database]
url = "sqlite:///{dir}/hookledger.db"

[receiver]
host = "127.0.0.1"
port = {receiver_port}

[worker]
handlers = ["reconciler.demo.worker_handlers"]
max_attempts = 10
backoff_base_seconds = 0.2
backoff_max_seconds = 1.0
poll_interval_seconds = 0.05

[outbox]
backoff_base_seconds = 0.2
backoff_max_seconds = 1.0
poll_interval_seconds = 0.05
lease_seconds = 10.0

[[outbox.targets]]
name = "mailer"
url = "{mailer}/receipts"
timeout_seconds = 1.0
max_attempts = 6
signing_secret_env = "HOOKLEDGER_DEMO_MAILER_SECRET"

[reconcile]
grace_seconds = 300
stuck_after_seconds = 3600

[business]
url = "sqlite:///{dir}/business.db"

[dashboard]
port = {dashboard_port}
operator = "demo-operator"

# what a team would send to Slack or a pager bridge: here the demo's stand-in ops channel
[[notify]]
name = "demo-ops"
kind = "webhook"
url = "{mailer}/ops"
signing_secret_env = "HOOKLEDGER_DEMO_NOTIFY_SECRET"
max_per_hour = 60
timeout_seconds = 2.0

[[sources]]
name = "stripe"
kind = "stripe"
base_url = "{sandbox}"
signing_secret_env = "HOOKLEDGER_DEMO_STRIPE_SECRET"
api_key_env = "HOOKLEDGER_DEMO_STRIPE_KEY"
initial_lookback_hours = 48
page_size = 100

[[sources.checks]]
object_type = "invoice"
table = "demo_invoices"
key = "stripe_invoice_id"
fields = {{ status = "status", amount_paid = "amount_paid" }}
amount = "amount_due"
currency = "currency"

[[sources.checks]]
event_types = ["invoice.paid"]
table = "demo_ledger"
key = "stripe_invoice_id"
unique_by = "stripe_invoice_id"
amount = "amount_paid"
currency = "currency"

[[sources]]
name = "github"
kind = "github"
base_url = "{sandbox}"
signing_secret_env = "HOOKLEDGER_DEMO_GITHUB_SECRET"
api_key_env = "HOOKLEDGER_DEMO_GITHUB_TOKEN"
repository = "octocat/Hello-World"
hook_id = 1
initial_lookback_hours = 48
page_size = 100

[[sources]]
name = "shopify"
kind = "shopify"
base_url = "{sandbox}"
signing_secret_env = "HOOKLEDGER_DEMO_SHOPIFY_SECRET"
api_key_env = "HOOKLEDGER_DEMO_SHOPIFY_TOKEN"
initial_lookback_hours = 48
page_size = 100

[[sources.checks]]
object_type = "order"
table = "demo_orders"
key = "order_id"
fields = {{ financial_status = "financial_status" }}

# received and reconciled from its Messages list: a status callback that never came, and a text
# message whose row was left at an earlier status
[[sources]]
name = "twilio"
kind = "twilio"
base_url = "{sandbox}"
signing_secret_env = "HOOKLEDGER_DEMO_TWILIO_TOKEN"
api_key_env = "HOOKLEDGER_DEMO_TWILIO_TOKEN"
account_sid = "{twilio_account}"
lists = ["messages"]
initial_lookback_hours = 48

[[sources.checks]]
object_type = "message"
table = "demo_sms"
key = "message_sid"
fields = {{ status = "status" }}

# received, not reconciled: Slack lists no events
[[sources]]
name = "slack"
kind = "slack"
signing_secret_env = "HOOKLEDGER_DEMO_SLACK_SECRET"
"""


def prepare_workspace(
    directory: Path, sandbox_url: str, receiver_port: int, dashboard_port: int, mailer_url: str
) -> Path:
    """A fresh workspace (the previous demo's databases are replaced)."""
    directory.mkdir(parents=True, exist_ok=True)
    for name in ("hookledger.db", "business.db", "faults.json", "truth.json"):
        for suffix in ("", "-wal", "-shm"):
            (directory / f"{name}{suffix}").unlink(missing_ok=True)
    config = directory / "config.toml"
    config.write_text(
        CONFIG.format(
            dir=directory.as_posix(),
            sandbox=sandbox_url,
            mailer=mailer_url,
            receiver_port=receiver_port,
            dashboard_port=dashboard_port,
            twilio_account=TWILIO_ACCOUNT,
        )
        + listed_config(sandbox_url)
    )
    env_lines = [f"{k}={v}" for k, v in DEMO_ENV.items()]
    env_lines.append(f"HOOKLEDGER_DEMO_DIR={directory.as_posix()}")
    (directory / "demo.env").write_text("\n".join(env_lines) + "\n")
    return config
