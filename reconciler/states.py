"""The states and kinds hookledger stores (short strings in the database): a module of their own
so that pure code (the judge, the CLI's parsing) names them without importing SQLAlchemy."""

from __future__ import annotations

import enum


class EventStatus(enum.StrEnum):
    PENDING = "pending"
    PROCESSING = "processing"
    PROCESSED = "processed"
    FAILED = "failed"  # last attempt failed, a retry is scheduled at next_attempt_at
    DEAD = "dead"
    IGNORED = "ignored"  # no handler and no forward target: nothing to do


class AttemptOutcome(enum.StrEnum):
    """How one processing attempt ended (``processing_attempts``): the status it left its event in,
    or ``interrupted``, an attempt that never came back (its worker was killed or hung), recorded
    by whoever recovered the event. Stored as a short string, like every status: no migration."""

    PROCESSED = "processed"
    FAILED = "failed"
    DEAD = "dead"
    IGNORED = "ignored"
    INTERRUPTED = "interrupted"


class EventOrigin(enum.StrEnum):
    WEBHOOK = "webhook"
    BACKFILL = "backfill"
    REPLAY = "replay"


class DeliveryOutcome(enum.StrEnum):
    ACCEPTED = "accepted"
    DUPLICATE = "duplicate"
    REJECTED = "rejected"
    CONFLICT = "conflict"  # a stored event id with other content: logged, flagged, not applied
    HANDSHAKE = (
        "handshake"  # a verified request that is no event (Slack's url_verification): answered
    )


class ErrorClass(enum.StrEnum):
    TRANSIENT = "transient"
    PERMANENT = "permanent"
    # the request may or may not have taken effect (sent, no answer): ask the handler's verify
    # function before running it again
    AMBIGUOUS = "ambiguous"
    # dead because its attempts never came back ([worker] max_hangs): timed out, or the worker
    # running it died, so often that it would take the workers in turn
    HUNG = "hung"


class OutboxStatus(enum.StrEnum):
    """An outgoing message's state (``outbox``)."""

    PENDING = "pending"  # written, not tried yet
    SENDING = "sending"  # claimed by a publisher (a lease): its POST is in flight
    SENT = "sent"  # the target answered 2xx
    FAILED = "failed"  # the last attempt failed, a retry is due at next_attempt_at
    DEAD = "dead"  # permanent failure or max_attempts: nothing retries it, a person decides


class NotificationStatus(enum.StrEnum):
    """A notification to one ``[[notify]]`` target (``notifications``)."""

    PENDING = "pending"  # recorded, not sent yet (or a retry is due at next_attempt_at)
    SENT = "sent"  # the target took it: never sent again
    FAILED = "failed"  # a permanent refusal or max attempts: logged, nothing retries it
    SUPPRESSED = "suppressed"  # over the target's max_per_hour: counted in the next one sent


# not sent yet: what a publisher still has to do, and what "pending" means on the dashboard
OUTBOX_UNSENT = (OutboxStatus.PENDING, OutboxStatus.SENDING, OutboxStatus.FAILED)


class IdempotencyStatus(enum.StrEnum):
    """A client's idempotency key (``idempotency_keys``)."""

    IN_PROGRESS = "in_progress"  # the first request is running (a lease)
    COMPLETED = "completed"  # its response is stored and answers every repeat


class RunStatus(enum.StrEnum):
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    SKIPPED = "skipped"


class DiscrepancyKind(enum.StrEnum):
    MISSING = "missing"
    DUPLICATE = "duplicate"
    DIVERGED = "diverged"
    UNAPPLIED = "unapplied"
    ORPHANED = "orphaned"
    STUCK = "stuck"
    DEAD = "dead"
    CONFLICT = "conflict"  # a redelivery's content differs from the stored event's, per field
    OUTBOX_STUCK = "outbox_stuck"  # an outgoing message unsent past stuck_after_seconds
    OUTBOX_DEAD = "outbox_dead"  # an outgoing message that gave up: a person decides


# The outbox's discrepancies and reconciliation runs name their target as a source of its own:
# "outbox:<target>", which no configured source can be (source names allow no colon).
OUTBOX_SOURCE_PREFIX = "outbox:"


class DiscrepancyStatus(enum.StrEnum):
    OPEN = "open"
    RESOLVED = "resolved"
    IGNORED = "ignored"


class IssueKind(enum.StrEnum):
    """What failed, in an issue (``hookledger_issues``): each kind is read from its own table."""

    DEAD_EVENT = "dead_event"  # an inbox event gave up (processing_attempts, outcome dead)
    OUTBOX_FAILURE = "outbox_failure"  # a delivery to an outbox target failed
    RECONCILE_FAILURE = "reconcile_failure"  # a reconciliation run failed
    DISCREPANCY = "discrepancy"  # an open discrepancy, grouped by its cause


class IssueStatus(enum.StrEnum):
    OPEN = "open"
    ACKNOWLEDGED = "acknowledged"  # someone is on it (who and when are kept)
    RESOLVED = "resolved"  # by an operator, or automatically; reopened when the cause comes back
