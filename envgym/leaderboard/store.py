"""The leaderboard store: verified submissions, their per-entry scores and episodes, in SQL.

SQLAlchemy 2 (ORM), any database SQLAlchemy reaches. The URL comes from, in order: the ``url``
argument (``--db``), ``$ENVGYM_LEADERBOARD_URL``, else the SQLite file
``$XDG_DATA_HOME/envgym/leaderboard.db`` (``~/.local/share/envgym/leaderboard.db``): the user's
data folder, so a leaderboard outlives the source tree and is never committed by accident
(``leaderboards/`` in the repository holds published *bundles*, the data the database is rebuilt
from). A plain path (no ``://``) is taken as a SQLite file. PostgreSQL:
``postgresql+psycopg://user:pass@host/db`` (``pip install 'psycopg[binary]'``).

Tables: ``submissions`` (one row per accepted bundle; its ``content_hash`` is unique, so
resubmitting the same bundle returns the existing row instead of a second one; ``submitter`` is
the name of the upload token, ``hidden`` takes it off the board), ``entry_scores`` (one row per
submission and suite entry), ``episodes`` (one row per episode, with the capped turn-by-turn
record the viewer shows; one row per agent of a multi-agent episode, ``agent`` holding its id, empty
for a single-agent one), ``tokens`` (upload and admin tokens: a name, a role and the sha256 of
the token, never the token itself) and ``audit`` (one row per hide, unhide or delete: who, when,
why, and what, since a deleted submission's row is gone). A database made before ``submitter`` and
``hidden`` existed gains the two columns when opened (and ``audit.subject`` likewise); one made
before ``episodes.agent`` existed gains it, its episodes keyed by (entry, seed, trial, agent).

Large columns stay out of lists: the board, the suite index and an entry's episode list read only
the small columns (``agent_metadata``, ``manifest`` and each episode's ``record`` are deferred and
may not load), so one submission with huge metadata or turns never slows the pages that list it.
The manifest is kept without the agent's metadata, which its own column holds.

Concurrent writers: every write is one transaction and the unique constraints decide races (the
loser of a race on the same hash rolls back and reports the winner's row). SQLite runs in WAL
mode (readers never wait for the writer) and write transactions start with ``BEGIN IMMEDIATE``
with a 60 s busy timeout, so writers queue instead of failing with "database is locked".
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar, Self

from envgym._clock import utc_timestamp
from envgym.errors import ConfigError, EnvgymError, MissingDependencyError

try:
    from sqlalchemy import (
        JSON,
        Boolean,
        Float,
        ForeignKey,
        Integer,
        String,
        UniqueConstraint,
        create_engine,
        delete,
        event,
        false,
        func,
        inspect,
        select,
        update,
    )
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, IntegrityError
    from sqlalchemy.orm import DeclarativeBase, Mapped, Session, defer, mapped_column, relationship, selectinload
    from sqlalchemy.schema import CreateColumn
except ImportError as err:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError("sqlalchemy", "leaderboard", "The leaderboard store") from err

from envgym.leaderboard.bundle import check_agent_name, episodes_key
from envgym.leaderboard.verify import Verified

__all__ = [
    "DEFAULT_DB_NAME",
    "ROLES",
    "URL_ENV",
    "DuplicateEpisodes",
    "Store",
    "default_url",
    "hash_token",
    "resolve_url",
]

URL_ENV = "ENVGYM_LEADERBOARD_URL"
DEFAULT_DB_NAME = "leaderboard.db"
#: Token roles: a submitter uploads; an admin also hides and unhides entries and reads the audit.
ROLES = ("submitter", "admin")
_TOKEN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@+-]{0,99}$")


class DuplicateEpisodes(EnvgymError, ValueError):
    """The episodes of a bundle are already on the board under another submission (the same run
    submitted again, e.g. under a new name); ``existing`` is that submission."""

    def __init__(self, existing: dict[str, Any]) -> None:
        self.existing = existing
        super().__init__(
            f"these episodes are already on the board as submission {existing['id']} "
            f"({existing['agent_name']!r} on {existing['suite_id']}, submitted {existing['submitted_at']}"
            f"{', hidden by a moderator' if existing.get('hidden') else ''}); the same run is ranked once. "
            f"To change its name: envgym leaderboard rename {existing['id']} NEW_NAME "
            f"(POST /api/submissions/{existing['id']}/rename on a server)."
        )

    def __reduce__(self) -> Any:  # survives pickling (the verify pool's child processes)
        return (type(self), (self.existing,))


class _Twin(Exception):
    """Inside :meth:`Store.add`'s transaction: submission ``submission_id`` has the same episodes."""

    def __init__(self, submission_id: int) -> None:
        self.submission_id = submission_id


def hash_token(token: str) -> str:
    """The sha256 (hex) of a token: what the ``tokens`` table keeps instead of the token."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def default_url() -> str:
    """``$ENVGYM_LEADERBOARD_URL``, else the SQLite file in the user's data folder."""
    url = os.environ.get(URL_ENV)
    if url:
        return url
    base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return f"sqlite:///{base / 'envgym' / DEFAULT_DB_NAME}"


def resolve_url(url: str | os.PathLike[str] | None) -> str:
    """A SQLAlchemy URL from ``--db`` (a URL, a SQLite file path, or ``None`` for the default)."""
    if url is None:
        return default_url()
    text = os.fspath(url)
    if "://" not in text:
        return f"sqlite:///{Path(text).expanduser().resolve()}"
    return text


class _Base(DeclarativeBase):
    type_annotation_map: ClassVar[dict[Any, Any]] = {dict[str, Any]: JSON, list[Any]: JSON}


class SubmissionRow(_Base):
    __tablename__ = "submissions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    content_hash: Mapped[str] = mapped_column(String(64), unique=True)
    suite_id: Mapped[str] = mapped_column(String(200), index=True)
    suite_name: Mapped[str] = mapped_column(String(200))
    suite_version: Mapped[str] = mapped_column(String(50))
    suite_sha256: Mapped[str] = mapped_column(String(64))
    agent_name: Mapped[str] = mapped_column(String(200))
    agent_spec: Mapped[str] = mapped_column(String(500))
    agent_metadata: Mapped[dict[str, Any]]
    manifest: Mapped[dict[str, Any]]
    created: Mapped[str] = mapped_column(String(40))
    submitted_at: Mapped[str] = mapped_column(String(40))
    envgym_version: Mapped[str] = mapped_column(String(40))
    git_commit: Mapped[str | None] = mapped_column(String(64), nullable=True)
    trials: Mapped[int] = mapped_column(Integer)
    success_rate: Mapped[float | None] = mapped_column(Float, nullable=True)
    mean_reward: Mapped[float | None] = mapped_column(Float, nullable=True)
    ci_low: Mapped[float | None] = mapped_column(Float, nullable=True)
    ci_high: Mapped[float | None] = mapped_column(Float, nullable=True)
    pass_k: Mapped[dict[str, Any]]
    episodes: Mapped[int] = mapped_column(Integer)
    scored: Mapped[int] = mapped_column(Integer)
    infra: Mapped[int] = mapped_column(Integer)
    bundle_size: Mapped[int | None] = mapped_column(Integer, nullable=True)
    # Added after the first release: _migrate adds them to older databases.
    submitter: Mapped[str | None] = mapped_column(String(100), nullable=True)
    hidden: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    # Added with duplicate refusal: bundle.episodes_key of the run (the same agent and episodes
    # under another name or text cap key alike); _migrate adds it and keys the stored rows. Unique,
    # so two uploads of one run racing past the look-up in add() cannot both be stored (PostgreSQL
    # runs them concurrently); NULL (unkeyed) may repeat.
    episodes_key: Mapped[str | None] = mapped_column(String(64), nullable=True, index=True, unique=True)

    entry_scores: Mapped[list[EntryScoreRow]] = relationship(
        back_populates="submission", cascade="all, delete-orphan", order_by="EntryScoreRow.position"
    )


class EntryScoreRow(_Base):
    __tablename__ = "entry_scores"
    __table_args__ = (UniqueConstraint("submission_id", "entry"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    submission_id: Mapped[int] = mapped_column(ForeignKey("submissions.id", ondelete="CASCADE"), index=True)
    position: Mapped[int] = mapped_column(Integer)
    entry: Mapped[str] = mapped_column(String(200))
    env_id: Mapped[str] = mapped_column(String(200))
    success_rate: Mapped[float | None] = mapped_column(Float, nullable=True)
    mean_reward: Mapped[float | None] = mapped_column(Float, nullable=True)
    ci_low: Mapped[float | None] = mapped_column(Float, nullable=True)
    ci_high: Mapped[float | None] = mapped_column(Float, nullable=True)
    mean_turns: Mapped[float | None] = mapped_column(Float, nullable=True)
    pass_k: Mapped[dict[str, Any]]
    episodes: Mapped[int] = mapped_column(Integer)
    scored: Mapped[int] = mapped_column(Integer)
    infra: Mapped[int] = mapped_column(Integer)

    submission: Mapped[SubmissionRow] = relationship(back_populates="entry_scores")


#: The unique key of an episode row (an agent's record, in a multi-agent episode).
_EPISODE_KEY = ("submission_id", "entry", "seed", "trial", "agent")


class EpisodeRow(_Base):
    __tablename__ = "episodes"
    __table_args__ = (
        UniqueConstraint(*_EPISODE_KEY, name="uq_episodes_record"),
        UniqueConstraint("submission_id", "ordinal"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    submission_id: Mapped[int] = mapped_column(ForeignKey("submissions.id", ondelete="CASCADE"), index=True)
    ordinal: Mapped[int] = mapped_column(Integer)
    entry: Mapped[str] = mapped_column(String(200))
    seed: Mapped[int] = mapped_column(Integer)
    trial: Mapped[int] = mapped_column(Integer)
    task_id: Mapped[str] = mapped_column(String(200))
    scored: Mapped[bool] = mapped_column(Boolean)
    success: Mapped[bool] = mapped_column(Boolean)
    total_reward: Mapped[float] = mapped_column(Float)
    num_turns: Mapped[int] = mapped_column(Integer)
    termination_reason: Mapped[str] = mapped_column(String(40))
    record: Mapped[dict[str, Any]]
    # Added with multi-agent suites: _migrate adds it (and widens the unique key) in older databases.
    agent: Mapped[str] = mapped_column(String(200), default="", server_default="")


class TokenRow(_Base):
    __tablename__ = "tokens"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    role: Mapped[str] = mapped_column(String(20))
    created_at: Mapped[str] = mapped_column(String(40))
    revoked: Mapped[bool] = mapped_column(Boolean, default=False)


class AuditRow(_Base):
    __tablename__ = "audit"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    # No foreign key: the audit outlives a submission deleted later.
    submission_id: Mapped[int] = mapped_column(Integer, index=True)
    action: Mapped[str] = mapped_column(String(20))
    reason: Mapped[str] = mapped_column(String(1000))
    token_name: Mapped[str] = mapped_column(String(100))
    at: Mapped[str] = mapped_column(String(40))
    # Added with deletes: what the action applied to (agent, suite, content hash).
    subject: Mapped[str] = mapped_column(String(400), default="", server_default="")


#: Columns added after a table's first release (added by :meth:`Store._migrate`).
_ADDED_COLUMNS = {"submissions": ("submitter", "hidden", "episodes_key"), "audit": ("subject",)}
#: Longest ``subject`` kept in an audit row.
_MAX_SUBJECT = 400


def _token_dict(row: TokenRow) -> dict[str, Any]:
    return {"name": row.name, "role": row.role, "created_at": row.created_at, "revoked": row.revoked}


def _audit_dict(row: AuditRow) -> dict[str, Any]:
    return {
        "id": row.id,
        "submission_id": row.submission_id,
        "action": row.action,
        "reason": row.reason,
        "token_name": row.token_name,
        "at": row.at,
        "subject": row.subject or "",
    }


def _subject(row: SubmissionRow) -> str:
    """What an audit row is about: the agent, the suite and the content hash (bounded)."""
    agent = row.agent_name if len(row.agent_name) <= 200 else row.agent_name[:199] + "\u2026"
    return f"{agent!r} on {row.suite_id}, content hash {row.content_hash}"[:_MAX_SUBJECT]


#: The submission columns a list reads (everything but the large JSON documents).
_LIST_DEFERRED = ("agent_metadata", "manifest")


def _submission_dict(row: SubmissionRow, *, entries: bool = True, metadata: bool = True) -> dict[str, Any]:
    """A submission as the API shows it; ``metadata=False`` for lists (the column is not loaded)."""
    data = {
        "id": row.id,
        "content_hash": row.content_hash,
        "suite_id": row.suite_id,
        "suite_name": row.suite_name,
        "suite_version": row.suite_version,
        "agent_name": row.agent_name,
        "agent_spec": row.agent_spec,
        "created": row.created,
        "submitted_at": row.submitted_at,
        "envgym_version": row.envgym_version,
        "git_commit": row.git_commit,
        "trials": row.trials,
        "success_rate": row.success_rate,
        "mean_reward": row.mean_reward,
        "ci_low": row.ci_low,
        "ci_high": row.ci_high,
        "pass_k": row.pass_k,
        "episodes": row.episodes,
        "scored": row.scored,
        "infra": row.infra,
        "bundle_size": row.bundle_size,
        "submitter": row.submitter,
        "hidden": bool(row.hidden),
    }
    if metadata:
        data["agent_metadata"] = row.agent_metadata
    if entries:
        data["entries"] = [
            {
                "entry": e.entry,
                "env_id": e.env_id,
                "success_rate": e.success_rate,
                "mean_reward": e.mean_reward,
                "ci_low": e.ci_low,
                "ci_high": e.ci_high,
                "mean_turns": e.mean_turns,
                "pass_k": e.pass_k,
                "episodes": e.episodes,
                "scored": e.scored,
                "infra": e.infra,
            }
            for e in row.entry_scores
        ]
    return data


def _episode_dict(row: EpisodeRow, *, record: bool) -> dict[str, Any]:
    data = {
        "ordinal": row.ordinal,
        "entry": row.entry,
        "seed": row.seed,
        "trial": row.trial,
        "task_id": row.task_id,
        "scored": row.scored,
        "success": row.success,
        "total_reward": row.total_reward,
        "num_turns": row.num_turns,
        "termination_reason": row.termination_reason,
    }
    if row.agent:  # one agent's record of a multi-agent episode
        data["agent_id"] = row.agent
    if record:
        data["turns"] = row.record.get("turns", [])
        data["final_observation"] = row.record.get("final_observation")
        data["errors"] = row.record.get("errors", [])
        if "final_screenshot" in row.record:
            data["final_screenshot"] = row.record["final_screenshot"]
    return data


def _list_options() -> list[Any]:
    """Query options of a list of submissions: the large columns stay in the database (reading
    one raises instead of loading it), the per-entry scores come in one more query."""
    return [
        *(defer(getattr(SubmissionRow, c), raiseload=True) for c in _LIST_DEFERRED),
        selectinload(SubmissionRow.entry_scores),
    ]


def _rank_key(item: dict[str, Any]) -> tuple[Any, ...]:
    success = item["success_rate"]
    reward = item["mean_reward"]
    return (success is None, -(success or 0.0), reward is None, -(reward or 0.0), item["id"])


class Store:
    """A leaderboard database.

    Args:
        url: a SQLAlchemy URL or a SQLite file path; ``None``: :func:`default_url`.
        create: create the tables (and the SQLite file's folder) when missing.
    """

    def __init__(self, url: str | os.PathLike[str] | None = None, *, create: bool = True) -> None:
        self.url = resolve_url(url)
        try:
            parsed = make_url(self.url)
        except ArgumentError as err:
            raise ConfigError(
                f"--db must be a SQLAlchemy URL (sqlite:///path.db, postgresql+psycopg://...) or a file path, "
                f"got {self.url!r}."
            ) from err
        self._sqlite = parsed.get_backend_name() == "sqlite"
        kwargs: dict[str, Any] = {}
        if self._sqlite:
            database = parsed.database
            if database and database != ":memory:" and create:
                Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)
            kwargs["connect_args"] = {"timeout": 60, "check_same_thread": False}
        else:
            kwargs["pool_pre_ping"] = True
        try:
            self.engine = create_engine(parsed, **kwargs)
        except ImportError as err:
            raise MissingDependencyError(
                str(err.name or parsed.drivername), "leaderboard", f"The database {parsed.drivername!r}"
            ) from err
        if self._sqlite:
            event.listen(self.engine, "connect", self._sqlite_connect)
            event.listen(self.engine, "begin", self._sqlite_begin)
        if create:
            _Base.metadata.create_all(self.engine)
            self._migrate()

    def _migrate(self) -> None:
        """Add the columns :data:`_ADDED_COLUMNS` to tables made without them."""
        with self.engine.connect() as connection:
            connection.execution_options(envgym_write=True)  # SQLite: one migrating process at a time
            with connection.begin():
                for table_name, added in _ADDED_COLUMNS.items():
                    table = _Base.metadata.tables[table_name]
                    present = {c["name"] for c in inspect(connection).get_columns(table_name)}
                    for name in added:
                        if name in present:
                            continue
                        column = CreateColumn(table.c[name]).compile(dialect=self.engine.dialect)
                        guard = "" if self._sqlite else "IF NOT EXISTS "  # PostgreSQL: a concurrent start
                        connection.exec_driver_sql(f"ALTER TABLE {table_name} ADD COLUMN {guard}{column}")
                        if name == "episodes_key":
                            self._key_stored_episodes(connection)
                            connection.exec_driver_sql(
                                "CREATE UNIQUE INDEX IF NOT EXISTS ix_submissions_episodes_key "
                                "ON submissions (episodes_key)"
                            )
                if "agent" not in {c["name"] for c in inspect(connection).get_columns(EpisodeRow.__tablename__)}:
                    self._migrate_episodes(connection)

    def _key_stored_episodes(self, connection: Any) -> None:
        """Give the submissions stored before ``episodes_key`` existed their key (from their
        episode rows, which keep the entry, seed, trial, agent and actions the key is made of)."""
        agents = "agent" in {c["name"] for c in inspect(connection).get_columns(EpisodeRow.__tablename__)}
        columns = [EpisodeRow.entry, EpisodeRow.seed, EpisodeRow.trial, EpisodeRow.record]
        submissions = connection.execute(
            select(SubmissionRow.id, SubmissionRow.suite_id, SubmissionRow.agent_spec)
        ).all()
        seen: set[str] = set()
        for submission_id, suite_id, agent_spec in sorted(submissions):
            rows = connection.execute(
                select(*columns, *([EpisodeRow.agent] if agents else [])).where(
                    EpisodeRow.submission_id == submission_id
                )
            ).all()
            episodes = [
                {
                    "entry": r.entry,
                    "seed": r.seed,
                    "trial": r.trial,
                    "agent_id": r.agent if agents else "",
                    "turns": (r.record or {}).get("turns", []),
                }
                for r in rows
            ]
            key = episodes_key(suite_id, agent_spec, episodes)
            if key in seen:  # stored twice before refusal existed: the first keeps the key
                continue
            seen.add(key)
            connection.execute(
                SubmissionRow.__table__.update().where(SubmissionRow.id == submission_id).values(episodes_key=key)
            )

    def _migrate_episodes(self, connection: Any) -> None:
        """Give an ``episodes`` table made before multi-agent suites its ``agent`` column, and key
        its rows by (submission, entry, seed, trial, agent) instead of (submission, entry, seed, trial)."""
        table = EpisodeRow.__table__
        name = table.name
        if self._sqlite:  # SQLite cannot drop a constraint: copy the rows into a new table
            old = f"{name}_before_agent"
            connection.exec_driver_sql(f"ALTER TABLE {name} RENAME TO {old}")
            for index in table.indexes:
                connection.exec_driver_sql(f"DROP INDEX IF EXISTS {index.name}")
            table.create(connection)
            columns = ", ".join(c.name for c in table.columns if c.name != "agent")
            connection.exec_driver_sql(f"INSERT INTO {name} ({columns}, agent) SELECT {columns}, '' FROM {old}")
            connection.exec_driver_sql(f"DROP TABLE {old}")
            return
        column = CreateColumn(table.c["agent"]).compile(dialect=self.engine.dialect)
        connection.exec_driver_sql(f"ALTER TABLE {name} ADD COLUMN IF NOT EXISTS {column}")
        for constraint in inspect(connection).get_unique_constraints(name):
            if set(constraint["column_names"]) == set(_EPISODE_KEY) - {"agent"}:
                connection.exec_driver_sql(f'ALTER TABLE {name} DROP CONSTRAINT "{constraint["name"]}"')
        key = ", ".join(_EPISODE_KEY)
        connection.exec_driver_sql(f"ALTER TABLE {name} ADD CONSTRAINT uq_episodes_record UNIQUE ({key})")

    # -- SQLite: WAL, and writers that queue ------------------------------------------------------
    @staticmethod
    def _sqlite_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # transactions are begun by _sqlite_begin
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA busy_timeout=60000")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    @staticmethod
    def _sqlite_begin(connection: Any) -> None:
        write = connection.get_execution_options().get("envgym_write", False)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

    @contextmanager
    def _session(self, *, write: bool = False) -> Iterator[Session]:
        with self.engine.connect() as connection:
            if write:
                connection.execution_options(envgym_write=True)
            with Session(bind=connection, expire_on_commit=False) as session:
                yield session

    def close(self) -> None:
        """Release the connections."""
        self.engine.dispose()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing -----------------------------------------------------------------------------------
    def find(self, content_hash: str) -> dict[str, Any] | None:
        """The submission with ``content_hash`` (hidden or not: the hash stays taken), or ``None``."""
        with self._session() as session:
            found = session.scalar(select(SubmissionRow.id).where(SubmissionRow.content_hash == content_hash))
        return self.submission(found, include_hidden=True) if found is not None else None

    def find_episodes(self, key: str) -> dict[str, Any] | None:
        """The submission whose episodes have :func:`~envgym.leaderboard.bundle.episodes_key`
        ``key`` (hidden or not), or ``None``."""
        with self._session() as session:
            found = session.scalar(select(SubmissionRow.id).where(SubmissionRow.episodes_key == key).limit(1))
        return self.submission(found, include_hidden=True) if found is not None else None

    def add(
        self, verified: Verified, *, bundle_size: int | None = None, submitter: str | None = None
    ) -> tuple[dict[str, Any], bool]:
        """Store a verified bundle in one transaction.

        ``submitter`` is the name of the token it was uploaded with (``None``: anonymous).
        Returns ``(submission, created)``: ``created`` is ``False`` when a bundle with the same
        content hash was already stored (then nothing is written and the stored one returned).

        Raises:
            DuplicateEpisodes: another submission holds the same episodes (the same run bundled
                again, e.g. under a new ``--name``): nothing is written.
        """
        bundle = verified.bundle
        scores = verified.scores
        assert scores is not None
        manifest = bundle.manifest
        existing = self.find(bundle.content_hash)
        if existing is not None:
            return existing, False
        key = episodes_key(verified.suite.id, manifest["agent"]["spec"], bundle.episodes)
        outcome = {(o.entry, o.seed, o.trial, o.agent): o for o in verified.outcomes}
        row = SubmissionRow(
            content_hash=bundle.content_hash,
            suite_id=verified.suite.id,
            suite_name=verified.suite.name,
            suite_version=verified.suite.version,
            suite_sha256=verified.suite.sha256,
            agent_name=manifest["agent"]["name"],
            agent_spec=manifest["agent"]["spec"],
            agent_metadata=dict(manifest["agent"].get("metadata") or {}),
            # Without the suite copy and the agent's metadata (its own column): nothing kept twice.
            manifest={
                **{k: v for k, v in manifest.items() if k not in ("suite_spec", "agent")},
                "agent": {k: v for k, v in manifest["agent"].items() if k != "metadata"},
            },
            created=str(manifest.get("created", "")),
            submitted_at=utc_timestamp("seconds"),
            envgym_version=str(manifest.get("envgym_version", "")),
            git_commit=manifest.get("git_commit") if isinstance(manifest.get("git_commit"), str) else None,
            trials=manifest["trials"],
            success_rate=scores.success_rate,
            mean_reward=scores.mean_reward,
            ci_low=scores.ci_low,
            ci_high=scores.ci_high,
            pass_k=dict(scores.pass_k),
            episodes=scores.episodes,
            scored=scores.scored,
            infra=scores.infra,
            bundle_size=bundle_size,
            submitter=submitter,
            hidden=False,
            episodes_key=key,
        )
        row.entry_scores = [
            EntryScoreRow(
                position=i,
                entry=e.entry,
                env_id=e.env_id,
                success_rate=e.success_rate,
                mean_reward=e.mean_reward,
                ci_low=e.ci_low,
                ci_high=e.ci_high,
                mean_turns=e.mean_turns,
                pass_k=dict(e.pass_k),
                episodes=e.episodes,
                scored=e.scored,
                infra=e.infra,
            )
            for i, e in enumerate(scores.entries)
        ]
        try:
            with self._session(write=True) as session, session.begin():
                # In the write transaction, so two uploads of one run cannot both pass the check.
                twin = session.scalar(select(SubmissionRow.id).where(SubmissionRow.episodes_key == key).limit(1))
                if twin is not None:
                    raise _Twin(twin)
                session.add(row)
                session.flush()
                episodes = []
                for ordinal, episode in enumerate(bundle.episodes):
                    replayed = outcome[(episode["entry"], episode["seed"], episode["trial"], episode.get("agent_id"))]
                    episodes.append(
                        EpisodeRow(
                            submission_id=row.id,
                            ordinal=ordinal,
                            entry=episode["entry"],
                            seed=episode["seed"],
                            trial=episode["trial"],
                            task_id=str(episode.get("task_id") or ""),
                            scored=replayed.scored,
                            success=replayed.success,
                            total_reward=replayed.total_reward,
                            num_turns=replayed.num_turns,
                            termination_reason=replayed.termination_reason,
                            agent=str(episode.get("agent_id") or ""),
                            record={
                                "turns": episode["turns"],
                                "final_observation": episode.get("final_observation"),
                                "errors": episode.get("errors", []),
                                **(
                                    {"final_screenshot": episode["final_screenshot"]}
                                    if "final_screenshot" in episode
                                    else {}
                                ),
                            },
                        )
                    )
                session.add_all(episodes)
            stored = self.submission(row.id, include_hidden=True)
            assert stored is not None
            return stored, True
        except _Twin as twin:
            found = self.submission(twin.submission_id, include_hidden=True)
            assert found is not None
            if found["content_hash"] == bundle.content_hash:  # this very bundle, stored by a concurrent writer
                return found, False
            raise DuplicateEpisodes(found) from None
        except IntegrityError:
            # Another writer stored the same bundle, or the same run, between our look-up and our insert.
            existing = self.find(bundle.content_hash)
            if existing is not None:
                return existing, False
            twin_row = self.find_episodes(key)
            if twin_row is None:
                raise
            raise DuplicateEpisodes(twin_row) from None

    def delete(self, submission_id: int, *, reason: str = "", by: str = "local") -> dict[str, Any] | None:
        """Remove a submission with its scores and episodes and write the audit row, in one
        transaction.

        ``by`` names who deleted it (a token's name, or ``local:<user>`` from the command line);
        the audit row's ``subject`` keeps what was deleted (agent, suite, content hash), since the
        submission's own row is gone. Returns the audit row, or ``None`` when there was no
        submission ``submission_id``.
        """
        with self._session(write=True) as session, session.begin():
            row = session.get(
                SubmissionRow, submission_id, options=[defer(getattr(SubmissionRow, c)) for c in _LIST_DEFERRED]
            )
            if row is None:
                return None
            audit = AuditRow(
                submission_id=submission_id,
                action="delete",
                reason=reason[:1000],
                token_name=by[:100],
                at=utc_timestamp("seconds"),
                subject=_subject(row),
            )
            session.execute(delete(EpisodeRow).where(EpisodeRow.submission_id == submission_id))
            session.execute(delete(EntryScoreRow).where(EntryScoreRow.submission_id == submission_id))
            session.execute(delete(SubmissionRow).where(SubmissionRow.id == submission_id))
            session.add(audit)
            session.flush()
            return _audit_dict(audit)

    # -- reading -----------------------------------------------------------------------------------
    def count(self, *, include_hidden: bool = False) -> int:
        """Number of stored submissions (shown ones, unless ``include_hidden``)."""
        query = select(func.count()).select_from(SubmissionRow)
        if not include_hidden:
            query = query.where(SubmissionRow.hidden == false())
        with self._session() as session:
            return int(session.scalar(query) or 0)

    def suites(self) -> list[dict[str, Any]]:
        """One dict per suite with submissions: id, name, version, submissions, best agent/score."""
        result = []
        with self._session() as session:
            ids = session.scalars(
                select(SubmissionRow.suite_id)
                .where(SubmissionRow.hidden == false())
                .distinct()
                .order_by(SubmissionRow.suite_id)
            ).all()
        for suite_id in ids:
            board = self.leaderboard(suite_id)
            best = board[0]
            result.append(
                {
                    "id": suite_id,
                    "name": best["suite_name"],
                    "version": best["suite_version"],
                    "submissions": len(board),
                    "best_agent": best["agent_name"],
                    "best_success_rate": best["success_rate"],
                }
            )
        return result

    def leaderboard(self, suite_id: str) -> list[dict[str, Any]]:
        """The shown submissions of ``suite_id``, best first (success rate, then mean reward), with
        ``rank`` and per-entry scores."""
        with self._session() as session:
            rows = session.scalars(
                select(SubmissionRow)
                .where(SubmissionRow.suite_id == suite_id, SubmissionRow.hidden == false())
                .options(*_list_options())
            ).all()
            items = [_submission_dict(r, metadata=False) for r in rows]
        items.sort(key=_rank_key)
        for rank, item in enumerate(items, start=1):
            item["rank"] = rank
        return items

    def submission(
        self, submission_id: int, *, include_hidden: bool = False, metadata: bool = True
    ) -> dict[str, Any] | None:
        """One submission with its per-entry scores, or ``None`` (also when hidden, unless
        ``include_hidden``). ``metadata=False`` leaves out (and does not read) the agent metadata."""
        with self._session() as session:
            row = session.get(SubmissionRow, submission_id, options=None if metadata else _list_options())
            if row is None or (row.hidden and not include_hidden):
                return None
            return _submission_dict(row, metadata=metadata)

    def episodes(self, submission_id: int) -> list[dict[str, Any]]:
        """The episodes of a submission (without their turns: the record is not even read), in bundle order."""
        with self._session() as session:
            rows = session.scalars(
                select(EpisodeRow)
                .where(EpisodeRow.submission_id == submission_id)
                .options(defer(EpisodeRow.record, raiseload=True))
                .order_by(EpisodeRow.ordinal)
            ).all()
            return [_episode_dict(r, record=False) for r in rows]

    def episode(self, submission_id: int, ordinal: int) -> dict[str, Any] | None:
        """One episode with its turns, or ``None``."""
        with self._session() as session:
            row = session.scalar(
                select(EpisodeRow).where(EpisodeRow.submission_id == submission_id, EpisodeRow.ordinal == ordinal)
            )
            return _episode_dict(row, record=True) if row is not None else None

    # -- tokens ------------------------------------------------------------------------------------
    def create_token(self, name: str, *, role: str = "submitter") -> str:
        """Make a token called ``name`` and return it: the only time it is seen (the database
        keeps its sha256).

        Raises:
            ConfigError: ``name`` is not 1 to 100 of ``A-Z a-z 0-9 . _ @ + -`` (starting with a
                letter or digit), is taken (names stay taken after a revoke, so the audit stays
                unambiguous), or ``role`` is not one of :data:`ROLES`.
        """
        if not isinstance(name, str) or not _TOKEN_NAME.match(name):
            raise ConfigError(
                f"a token name is 1 to 100 characters of letters, digits and . _ @ + - (starting with a letter "
                f"or digit), got {name!r}."
            )
        if role not in ROLES:
            raise ConfigError(f"a token's role is one of {', '.join(ROLES)}, got {role!r}.")
        token = secrets.token_urlsafe(32)
        row = TokenRow(name=name, token_hash=hash_token(token), role=role, created_at=utc_timestamp("seconds"))
        try:
            with self._session(write=True) as session, session.begin():
                session.add(row)
        except IntegrityError:
            raise ConfigError(
                f"a token named {name!r} exists already (revoked ones keep their name); choose another name."
            ) from None
        return token

    def tokens(self) -> list[dict[str, Any]]:
        """Every token's name, role, creation time and revoked flag (never the hash), oldest first."""
        with self._session() as session:
            return [_token_dict(r) for r in session.scalars(select(TokenRow).order_by(TokenRow.id)).all()]

    def revoke_token(self, name: str) -> bool:
        """Revoke the token ``name``; ``False`` when there is no such token or it was revoked already."""
        with self._session(write=True) as session, session.begin():
            result = session.execute(
                update(TokenRow).where(TokenRow.name == name, TokenRow.revoked == false()).values(revoked=True)
            )
            return bool(result.rowcount)

    def resolve_token(self, token: str) -> dict[str, Any] | None:
        """``{"name", "role"}`` of the live token ``token``, or ``None`` (unknown or revoked).

        Every live token's hash is compared with :func:`hmac.compare_digest`, without stopping at
        a match, so the answer's timing says nothing about how close a guess came.
        """
        digest = hash_token(token)
        with self._session() as session:
            rows = session.execute(
                select(TokenRow.name, TokenRow.role, TokenRow.token_hash).where(TokenRow.revoked == false())
            ).all()
        found = None
        for name, role, stored in rows:
            if hmac.compare_digest(stored, digest):
                found = {"name": name, "role": role}
        return found

    # -- moderation --------------------------------------------------------------------------------
    def set_hidden(self, submission_id: int, hidden: bool, *, reason: str, by: str) -> dict[str, Any] | None:
        """Hide (or show again) a submission and write the audit row, in one transaction.

        Returns the audit row, or ``None`` when there is no submission ``submission_id``. A hidden
        submission leaves the board, the listings and its pages but stays in the database.
        """
        with self._session(write=True) as session, session.begin():
            row = session.get(
                SubmissionRow, submission_id, options=[defer(getattr(SubmissionRow, c)) for c in _LIST_DEFERRED]
            )
            if row is None:
                return None
            row.hidden = hidden
            audit = AuditRow(
                submission_id=submission_id,
                action="hide" if hidden else "unhide",
                reason=reason,
                token_name=by,
                at=utc_timestamp("seconds"),
                subject=_subject(row),
            )
            session.add(audit)
            session.flush()
            return _audit_dict(audit)

    def rename(self, submission_id: int, name: str, *, reason: str = "", by: str) -> dict[str, Any] | None:
        """Give a submission a new agent name and write the audit row (``reason`` records the old
        and the new name), in one transaction.

        Returns the audit row, or ``None`` when there is no submission ``submission_id``.

        Raises:
            BundleError: ``name`` is not plain text of 1 to 200 characters.
        """
        name = check_agent_name(name.strip() if isinstance(name, str) else name)
        with self._session(write=True) as session, session.begin():
            row = session.get(
                SubmissionRow, submission_id, options=[defer(getattr(SubmissionRow, c)) for c in _LIST_DEFERRED]
            )
            if row is None:
                return None
            old = row.agent_name
            subject = _subject(row)
            row.agent_name = name
            change = f"renamed {old!r} to {name!r}"
            audit = AuditRow(
                submission_id=submission_id,
                action="rename",
                reason=(f"{change}: {reason}" if reason else change)[:1000],
                token_name=by[:100],
                at=utc_timestamp("seconds"),
                subject=subject,
            )
            session.add(audit)
            session.flush()
            return _audit_dict(audit)

    def audit(self) -> list[dict[str, Any]]:
        """Every hide, unhide, rename and delete, oldest first."""
        with self._session() as session:
            return [_audit_dict(r) for r in session.scalars(select(AuditRow).order_by(AuditRow.id)).all()]
