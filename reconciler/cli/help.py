"""Every command's ``--help``: what it does, examples, and its exit statuses, kept in one table so
that they read alike (``tests/e2e/test_cli_help.py`` holds each command to it and parses each
example with the real parser)."""

from __future__ import annotations

import argparse
import textwrap
from dataclasses import dataclass

ERROR = "2   error: bad configuration or option, database not initialised or unreachable (one line)"
STOPPED = "0   stopped by SIGTERM or Ctrl-C after finishing what was in flight"


@dataclass(frozen=True)
class Help:
    description: str
    examples: tuple[str, ...]
    exits: tuple[str, ...] = ("0   done", ERROR)


COMMANDS: dict[str, Help] = {
    "init": Help(
        "Create the database schema, or upgrade it to this release's (Alembic migrations shipped "
        "in the package). Safe to repeat; run it once per release before starting the services.",
        ("hookledger init", "hookledger init --config /etc/hookledger/config.toml"),
    ),
    "doctor": Help(
        "Check that this installation can run: one line per check (PASS, WARN, FAIL, SKIP), "
        "nothing written anywhere; secrets are reported set or not, never shown.",
        (
            "hookledger doctor",
            "hookledger doctor --config /etc/hookledger/config.toml --json",
            "hookledger doctor --offline",
        ),
        ("0   no check failed (warnings allowed)", "2   a check failed"),
    ),
    "notify": Help(
        "Tell the [[notify]] targets what is new: runs that found new discrepancies, scheduled "
        "runs that failed or were missed, new or reopened issues (dead letters grouped); each is "
        "told once, within its max_per_hour. 'hookledger schedule' does this every minute; run "
        "it from cron otherwise.",
        (
            "hookledger notify",
            "hookledger notify --test --target ops-slack",
            "hookledger notify --json",
        ),
        (
            "0   done: every due notification sent, or held back by the rate limit",
            "2   a target could not be told (said on one line each; retried later), or "
            + ERROR[4:],
        ),
    ),
    "serve": Help(
        "Run the webhook receiver: POST /webhooks/<source>, GET /healthz, GET /metrics. A delivery "
        "is answered 2xx only after it is committed.",
        ("hookledger serve", "hookledger serve --host 0.0.0.0 --port 8000"),
        (STOPPED, ERROR + "; a port in use; a source's signing secret unset"),
    ),
    "worker": Help(
        "Apply stored events with the registered handlers (or forward them), retrying with backoff "
        "and dead-lettering after [worker] max_attempts. Each worker is a process of its own: an "
        "attempt past [worker] handler_timeout_seconds is abandoned (its process killed, the event "
        "retried, dead as hung after [worker] max_hangs), and SIGTERM stops the command within "
        "[worker] shutdown_grace_seconds.",
        (
            "hookledger worker",
            "hookledger worker --concurrency 4",
            "hookledger worker --once --publish",
        ),
        (
            "0   --once: what was due is done; else stopped by SIGTERM or Ctrl-C",
            "2   error: bad configuration or option, database not initialised or unreachable, or "
            "(--once) a worker process that died outside any attempt (one line)",
        ),
    ),
    "publish": Help(
        "Send the outbox's due messages to their targets, signed, with their Idempotency-Key.",
        ("hookledger publish", "hookledger publish --once --concurrency 8"),
        ("0   --once: what was due is sent; else stopped by SIGTERM or Ctrl-C", ERROR),
    ),
    "reconcile": Help(
        "Compare each source with the inbox and the business tables and record what is missing, "
        "duplicate, diverged, unapplied, orphaned, stuck or dead.",
        (
            "hookledger reconcile",
            "hookledger reconcile --source stripe --since 2026-12-01T00:00:00Z --dry-run",
            "hookledger reconcile --json --fail-on-discrepancy",
        ),
        (
            "0   ran (with --fail-on-discrepancy: and nothing is open)",
            "1   --fail-on-discrepancy: ran, and open discrepancies remain",
            ERROR + "; a source unreachable or refusing its key",
            "3   skipped: another reconciliation of the source holds its lease",
        ),
    ),
    "schedule": Help(
        "Run the reconciliation on [reconcile] schedule (cron, in its time zone) and record queue "
        "snapshots; one per deployment.",
        ("hookledger schedule", "hookledger schedule --run-now"),
        (STOPPED, ERROR),
    ),
    "export": Help(
        "Write discrepancies as CSV (written whole or not at all; cells a spreadsheet would run "
        "as formulas are quoted).",
        (
            "hookledger export -o discrepancies.csv",
            "hookledger export --source stripe --kind missing --status all -o -",
        ),
        ("0   written", ERROR, "141 the reader of standard output stopped early"),
    ),
    "discrepancies resolve": Help(
        "Mark a discrepancy resolved (audited); without an id, every one matching the filters, "
        "after showing the count.",
        (
            'hookledger discrepancies resolve 42 --reason "refunded by hand"',
            'hookledger discrepancies resolve --source stripe --kind stuck --reason "replayed" --yes',
        ),
    ),
    "discrepancies ignore": Help(
        "Mark a discrepancy ignored (audited): later runs leave it ignored.",
        ('hookledger discrepancies ignore 42 --reason "test mode object"',),
    ),
    "discrepancies keep-stored": Help(
        "A conflict: the stored version of the event is right. Resolves every conflicting field "
        "of the event (audited with both fingerprints).",
        ('hookledger discrepancies keep-stored 17 --reason "proxy rewrote the body"',),
    ),
    "discrepancies apply-later": Help(
        "A conflict: the later delivery is right. Its body replaces the stored one and the event "
        "is replayed with the same id (audited with both fingerprints and the replaced body).",
        ('hookledger discrepancies apply-later 17 --reason "provider corrected the amount"',),
    ),
    "backfill": Help(
        "Fetch an event from its source into the inbox (origin backfill, the receiver's "
        "insert-if-new path: the late real webhook becomes a duplicate).",
        (
            "hookledger backfill evt_1QabcXYZ --source stripe",
            "hookledger backfill 3f1c2a10-0000-11ef-8000-000000000000 --source github --redeliver",
        ),
    ),
    "replay": Help(
        "Put a failed, dead, processed or ignored event back to pending with the same id "
        "(audited). With --status dead instead of an id: every dead event of the source that the "
        "filters select, as the dashboard's bulk replay does (one transaction, one audit entry): "
        "--dry-run counts them and shows the first ids; --yes replays them, refused if the count "
        "moved since (--expect N: the count the dry run showed).",
        (
            'hookledger replay evt_1QabcXYZ --source stripe --reason "handler fixed in 1.4.2"',
            "hookledger replay --source stripe --status dead --since 2026-12-05T00:00:00Z "
            "--error timeout --dry-run",
            "hookledger replay --source stripe --status dead --since 2026-12-05T00:00:00Z "
            '--error timeout --yes --expect 42 --reason "ledger API back"',
        ),
        (
            "0   replayed (or, with --dry-run, counted)",
            "2   " + ERROR[4:] + "; an unknown event; nothing selected; the selection's count "
            "moved since --expect",
        ),
    ),
    "events list": Help(
        "Inbox events, newest first, filtered by source, status, type, time and the text of their "
        "last error (masked as the dashboard masks it); a page at a time, the next page's "
        "--cursor printed at the end.",
        (
            "hookledger events list --status dead --source stripe",
            "hookledger events list --status failed --error timeout --since 2026-12-05T00:00:00Z",
            "hookledger events list --type invoice.paid --limit 200 --json",
        ),
    ),
    "events show": Help(
        "An event with its deliveries, processing attempts and audit trail; its payload masked "
        "as the dashboard masks it.",
        (
            "hookledger events show evt_1QabcXYZ --source stripe",
            "hookledger events show evt_1QabcXYZ --source stripe --json --raw",
        ),
    ),
    "events tail": Help(
        "Follow new deliveries as the receiver stores them, one line each (source, delivery id, "
        "outcome, HTTP status, event id and type, the event's status), and a line each time one "
        "of their events changes status (processed, failed with its error masked, dead), as "
        "'stripe listen' does. Reads the delivery log by id after the last one seen; Ctrl-C stops "
        "it.",
        (
            "hookledger events tail",
            "hookledger events tail --source stripe --interval 0.5",
        ),
        ("0   stopped with Ctrl-C", ERROR),
    ),
    "send": Help(
        "Send a realistic sample event of the source's kind (or --file's body), signed with the "
        "source's own secret exactly as its provider signs, to the running receiver (or --to); "
        "prints each answer. A provider that signs the URL it calls (Twilio) is signed for --to's "
        'URL; a Stripe source with payload_style = "thin" gets a thin (v2) event. The '
        "development loop's stand-in for 'stripe trigger'. A receiver not listening yet (just "
        "started with 'serve &') is tried again for up to --wait seconds (default 10).",
        (
            "hookledger send stripe",
            "hookledger send stripe --wait 30",
            "hookledger send stripe --type invoice.payment_failed --count 3",
            "hookledger send github --file push.json --to http://localhost:8000/webhooks/github",
        ),
        (
            "0   every event answered 2xx (accepted or duplicate)",
            "1   the receiver refused at least one (its answer printed: a wrong secret, a body "
            "it cannot take)",
            "2   " + ERROR[4:] + "; no such source; a type it has no sample of; the receiver "
            "cannot be reached",
        ),
    ),
    "deliveries list": Help(
        "The delivery log, newest first: every HTTP delivery with its outcome (accepted, "
        "duplicate, rejected, conflict, handshake), status and reason; the next page's --before "
        "printed at the end.",
        (
            "hookledger deliveries list --source stripe --outcome rejected",
            "hookledger deliveries list --since 2026-12-05T00:00:00Z --json",
        ),
    ),
    "deliveries resend": Help(
        "Send a stored delivery again: its exact bytes, signed afresh with the source's scheme (a "
        "fresh timestamp where it has one), to the URL given, --times times. Sent ten times to a "
        "receiver that has not stored the event yet (a fresh one, or another database), the first "
        "is accepted and the next nine are duplicates that touch no business table; to the "
        "receiver that stored it in the first place, all ten are duplicates.",
        (
            "hookledger deliveries resend 1234 --to http://localhost:8000/webhooks/stripe",
            "hookledger deliveries resend 1234 --to http://localhost:8000/webhooks/stripe "
            "--times 10",
        ),
        (
            "0   sent (each answer printed, whatever its status)",
            "2   " + ERROR[4:] + "; no such delivery, or it stored nothing; the URL cannot be "
            "reached; the source's scheme cannot be signed again",
        ),
    ),
    "outbox list": Help(
        "Outgoing messages, newest first.",
        (
            "hookledger outbox list",
            "hookledger outbox list --target crm --status dead --status failed --json",
        ),
    ),
    "outbox show": Help(
        "One outgoing message with its attempts; its payload masked unless --raw.",
        ("hookledger outbox show 1207", "hookledger outbox show 1207 --json"),
    ),
    "outbox recover": Help(
        "Every message of a target that went dead since a time back to pending with its key (as "
        "Svix's 'recover since'): --dry-run counts them; --yes recovers them in one transaction "
        "with one audit entry, refused if the count moved since (--expect N).",
        (
            "hookledger outbox recover --target crm --since 2026-12-05T00:00:00Z --dry-run",
            "hookledger outbox recover --target crm --since 2026-12-05T00:00:00Z --yes "
            '--expect 42 --reason "CRM back up"',
        ),
        (
            "0   recovered (or, with --dry-run, counted)",
            "2   " + ERROR[4:] + "; an unknown target; nothing to recover; the count moved",
        ),
    ),
    "outbox pause": Help(
        "Stop sending a target's messages: they stay pending and no publisher claims them until "
        "the target is resumed (a message already in flight finishes). Audited with its reason; "
        "the Outbox page shows who paused it and when.",
        ('hookledger outbox pause crm --reason "CRM maintenance until 06:00"',),
        ("0   paused", "2   " + ERROR[4:] + "; an unknown target; already paused"),
    ),
    "outbox resume": Help(
        "Send a paused target's messages again, where they were; audited with its reason.",
        ('hookledger outbox resume crm --reason "CRM maintenance over"',),
        ("0   resumed", "2   " + ERROR[4:] + "; the target is not paused"),
    ),
    "outbox replay": Help(
        "Put dead (or failed) messages back to pending with their keys, attempts from zero; one "
        "transaction, audited.",
        ('hookledger outbox replay 1207 1208 --reason "crm back up"',),
    ),
    "issues list": Help(
        "Failures grouped as issues (dead events, failed outbox deliveries, failed runs, open "
        "discrepancies) by source, type and error signature, the most recently failing first; "
        "brought up to date first. --json gives each issue's id, status and count.",
        (
            "hookledger issues list",
            "hookledger issues list --status open --source stripe --json",
        ),
    ),
    "issues show": Help(
        "One issue: its signature, a sample error, counts per hour and per day, who acknowledged "
        "or resolved it, and its latest failures.",
        ("hookledger issues show 12", "hookledger issues show 12 --members 100 --json"),
        ("0   done", "2   no such issue, or " + ERROR[4:]),
    ),
    "issues ack": Help(
        "Acknowledge an open issue: someone is on it (who and when are kept and audited).",
        ("hookledger issues ack 12", "hookledger issues ack 12 --actor ana"),
        ("0   done", "2   no such issue, or it is not open, or " + ERROR[4:]),
    ),
    "issues resolve": Help(
        "Resolve an issue (audited); it reopens by itself when its cause comes back. Issues "
        "also resolve themselves after [issues] auto_resolve_after without a new failure once "
        "none of their items still fails.",
        (
            "hookledger issues resolve 12",
            'hookledger issues resolve 12 --reason "plan table fixed"',
        ),
        ("0   done", "2   no such issue, or it is resolved already, or " + ERROR[4:]),
    ),
    "issues retry": Help(
        "Put every dead event of an issue back to pending, same event ids, through the bulk "
        "replay: --dry-run counts them; --yes replays them in one transaction with one audit "
        "entry, refused if the count moved from --expect.",
        ("hookledger issues retry 12 --dry-run", "hookledger issues retry 12 --yes --expect 42"),
        (
            "0   done",
            "2   no such issue, not an issue of dead events, the count moved, or " + ERROR[4:],
        ),
    ),
    "drill": Help(
        "The redelivery drill: deliver stored events again (twice, shuffled) to the handlers or a "
        "staging receiver and compare the business state with the reference.",
        (
            "hookledger drill --source stripe --since 2026-12-01T00:00:00Z --handlers",
            "hookledger drill --source stripe --since 2026-12-01T00:00:00Z --target "
            "http://staging:8000 --business-url postgresql+psycopg://staging/app "
            "--reference-url postgresql+psycopg://db/app",
        ),
        ("0   the drilled state equals the reference", "1   it differs", ERROR),
    ),
    "snapshot": Help(
        "Record one queue snapshot per source and roll closed hours up into hourly_counts (what "
        "hookledger schedule does; for a cron setup).",
        ("hookledger snapshot",),
    ),
    "prune": Help(
        "Delete processed and ignored events older than the retention, with their attempts and "
        "deliveries, in batches (audited); pending, failed and dead events stay.",
        ("hookledger prune --dry-run", "hookledger prune --keep-days 30"),
    ),
    "dashboard": Help(
        "Serve the operations dashboard (Streamlit) on [dashboard] host and port.",
        ("hookledger dashboard", "hookledger dashboard --port 8601"),
        (STOPPED, ERROR + "; a port in use"),
    ),
    "sandbox": Help(
        "Run the local sandbox provider (Stripe, GitHub and Shopify APIs); --send delivers its "
        "events to the receiver with faults and writes the ground truth.",
        (
            "hookledger sandbox --port 8765",
            "hookledger sandbox --send --drop 0.05 --duplicate 0.05 --latency-ms 300 --rate-limit 25",
        ),
        (STOPPED, ERROR),
    ),
    "demo": Help(
        "Run the whole system on a realistic day of sandbox traffic with faults, compare the "
        "reconciliation with the ground truth, then open the dashboard.",
        ("hookledger demo", "hookledger demo --events 1000 --no-dashboard"),
        (
            "0   the reconciliation found exactly what the sandbox did",
            "1   it differs from the ground truth (var/demo/truth.json)",
            ERROR,
        ),
    ),
}


def epilog(entry: Help) -> str:
    examples = "\n".join(f"  {e}" for e in entry.examples)
    exits = "\n".join(f"  {e}" for e in entry.exits)
    return f"examples:\n{examples}\n\nexit status:\n{exits}"


def document(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> None:
    """Give every command its description, examples and exit statuses from :data:`COMMANDS`."""
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        for name, sub in action.choices.items():
            key = " ".join((*path, name))
            entry = COMMANDS.get(key)
            if entry is not None:
                sub.description = textwrap.fill(entry.description, width=88)
                sub.epilog = epilog(entry)
                sub.formatter_class = argparse.RawDescriptionHelpFormatter
            document(sub, (*path, name))
