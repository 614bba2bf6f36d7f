"""Typed SQLAlchemy 2.x models, one module per part of the product (the names are imported from
here).

Statuses and outcomes are Enums stored as short strings (no native enum types), so migrations are
identical on SQLite and PostgreSQL. Constraint names follow one naming convention (``base``).
"""

from reconciler.states import (
    AttemptOutcome as AttemptOutcome,
)
from reconciler.states import (
    DeliveryOutcome as DeliveryOutcome,
)
from reconciler.states import (
    DiscrepancyKind as DiscrepancyKind,
)
from reconciler.states import (
    DiscrepancyStatus as DiscrepancyStatus,
)
from reconciler.states import (
    ErrorClass as ErrorClass,
)
from reconciler.states import (
    EventOrigin as EventOrigin,
)
from reconciler.states import (
    EventStatus as EventStatus,
)
from reconciler.states import (
    IdempotencyStatus as IdempotencyStatus,
)
from reconciler.states import (
    IssueKind as IssueKind,
)
from reconciler.states import (
    IssueStatus as IssueStatus,
)
from reconciler.states import (
    NotificationStatus as NotificationStatus,
)
from reconciler.states import (
    OutboxStatus as OutboxStatus,
)
from reconciler.states import (
    RunStatus as RunStatus,
)
from reconciler.storage.models.base import NAMING_CONVENTION as NAMING_CONVENTION
from reconciler.storage.models.base import Base as Base
from reconciler.storage.models.base import BigId as BigId
from reconciler.storage.models.inbox import APPLIED as APPLIED
from reconciler.storage.models.inbox import AUDIT_LOG as AUDIT_LOG
from reconciler.storage.models.inbox import DELIVERIES as DELIVERIES
from reconciler.storage.models.inbox import INBOX_EVENTS as INBOX_EVENTS
from reconciler.storage.models.inbox import PROCESSING_ATTEMPTS as PROCESSING_ATTEMPTS
from reconciler.storage.models.inbox import Applied as Applied
from reconciler.storage.models.inbox import AuditLog as AuditLog
from reconciler.storage.models.inbox import Delivery as Delivery
from reconciler.storage.models.inbox import InboxEvent as InboxEvent
from reconciler.storage.models.inbox import ProcessingAttempt as ProcessingAttempt
from reconciler.storage.models.issues import ISSUE_MARKS as ISSUE_MARKS
from reconciler.storage.models.issues import ISSUE_MEMBERS as ISSUE_MEMBERS
from reconciler.storage.models.issues import ISSUES as ISSUES
from reconciler.storage.models.issues import Issue as Issue
from reconciler.storage.models.issues import IssueMark as IssueMark
from reconciler.storage.models.issues import IssueMember as IssueMember
from reconciler.storage.models.monitoring import HEALTH_SILENCES as HEALTH_SILENCES
from reconciler.storage.models.monitoring import HOURLY_COUNTS as HOURLY_COUNTS
from reconciler.storage.models.monitoring import QUEUE_SNAPSHOTS as QUEUE_SNAPSHOTS
from reconciler.storage.models.monitoring import QUEUE_SNAPSHOTS_HOURLY as QUEUE_SNAPSHOTS_HOURLY
from reconciler.storage.models.monitoring import ROLLUP_MARKS as ROLLUP_MARKS
from reconciler.storage.models.monitoring import SCHEDULER_HEARTBEATS as SCHEDULER_HEARTBEATS
from reconciler.storage.models.monitoring import HourlyCount as HourlyCount
from reconciler.storage.models.monitoring import QueueSnapshot as QueueSnapshot
from reconciler.storage.models.monitoring import QueueSnapshotHourly as QueueSnapshotHourly
from reconciler.storage.models.monitoring import RollupMark as RollupMark
from reconciler.storage.models.monitoring import SchedulerHeartbeat as SchedulerHeartbeat
from reconciler.storage.models.monitoring import Silence as Silence
from reconciler.storage.models.notify import NOTIFICATIONS as NOTIFICATIONS
from reconciler.storage.models.notify import NOTIFY_TARGETS as NOTIFY_TARGETS
from reconciler.storage.models.notify import Notification as Notification
from reconciler.storage.models.notify import NotifyTarget as NotifyTarget
from reconciler.storage.models.outgoing import IDEMPOTENCY_KEYS as IDEMPOTENCY_KEYS
from reconciler.storage.models.outgoing import OUTBOX as OUTBOX
from reconciler.storage.models.outgoing import OUTBOX_ATTEMPTS as OUTBOX_ATTEMPTS
from reconciler.storage.models.outgoing import OUTBOX_PAUSES as OUTBOX_PAUSES
from reconciler.storage.models.outgoing import OUTBOX_SNAPSHOTS as OUTBOX_SNAPSHOTS
from reconciler.storage.models.outgoing import IdempotencyKey as IdempotencyKey
from reconciler.storage.models.outgoing import OutboxAttempt as OutboxAttempt
from reconciler.storage.models.outgoing import OutboxMessage as OutboxMessage
from reconciler.storage.models.outgoing import OutboxPause as OutboxPause
from reconciler.storage.models.outgoing import OutboxSnapshot as OutboxSnapshot
from reconciler.storage.models.reconcile import CURSORS as CURSORS
from reconciler.storage.models.reconcile import DISCREPANCIES as DISCREPANCIES
from reconciler.storage.models.reconcile import ORPHAN_WATERMARKS as ORPHAN_WATERMARKS
from reconciler.storage.models.reconcile import RECON_LEASES as RECON_LEASES
from reconciler.storage.models.reconcile import RECON_RUNS as RECON_RUNS
from reconciler.storage.models.reconcile import RECON_SEEN as RECON_SEEN
from reconciler.storage.models.reconcile import Discrepancy as Discrepancy
from reconciler.storage.models.reconcile import OrphanWatermark as OrphanWatermark
from reconciler.storage.models.reconcile import ReconLease as ReconLease
from reconciler.storage.models.reconcile import ReconRun as ReconRun
from reconciler.storage.models.reconcile import ReconSeen as ReconSeen
from reconciler.storage.models.reconcile import SourceCursor as SourceCursor
