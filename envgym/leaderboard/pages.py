"""The leaderboard's HTML pages, rendered on the server (and by :func:`export_site` to files).

Plain HTML with the stylesheet and the script inlined (``static/``): no CDN, no network, and an
exported site works from a folder. Pages: the index of suites, a suite's ranked table (sortable by
clicking a header) with a confidence-interval plot (inline SVG), a submission's page with its
per-environment scores and episode list, and the turn-by-turn viewer of one episode.

Every renderer takes ``href``, which maps a site path (``/suites/core-v1``) to the link to put in
the page: the path itself on the server, a relative ``.html`` file in an export (API paths
``/api/...`` become ``.json`` files there). Each page links its JSON API twin at the bottom.

The export (:func:`export_site`) writes every page, the JSON API as static files (the same
documents the server answers) and the stylesheet and script once under ``static/`` (pages link
them instead of inlining them, which keeps a site of hundreds of episode pages small).

Everything a submitter wrote (agent names, metadata, observations, actions...) passes through
:func:`plain` before it is shown, here and in the terminal (``envgym leaderboard list``): control
characters, terminal escapes, bidirectional overrides and lone surrogates become visible ``\\xNN``
/ ``\\uNNNN`` text instead of acting on the reader's screen.
"""

from __future__ import annotations

import html
import json
import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import quote

__all__ = [
    "episode_page",
    "export_file",
    "export_site",
    "index_page",
    "matches",
    "plain",
    "submission_page",
    "suite_page",
]

Href = Callable[[str], str]

# C0 controls but tab and newline, DEL and C1 controls (ESC, CSI...), the bidirectional marks,
# embeddings, overrides and isolates, line/paragraph separators, and lone surrogates (which cannot
# even be encoded as UTF-8).
_CONTROLS = "\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029\ud800-\udfff"
_UNSAFE = re.compile(f"[{_CONTROLS}]")
_UNSAFE_ONE_LINE = re.compile(f"[\t\n{_CONTROLS}]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def plain(value: Any, *, newlines: bool = True) -> str:
    """``value`` as text that cannot act on a screen: control characters (terminal escapes
    included), bidirectional overrides and lone surrogates are written as ``\\xNN`` or ``\\uNNNN``.

    Tab and newline are kept when ``newlines`` (observations in a page), escaped too otherwise (a
    name in a table cell of a terminal). ``None`` is the empty string.
    """
    text = "" if value is None else str(value)
    return (_UNSAFE if newlines else _UNSAFE_ONE_LINE).sub(_visible, text)


def _esc(value: Any) -> str:
    return html.escape(plain(value), quote=True)


@cache
def _asset(name: str) -> str:
    return resources.files("envgym.leaderboard").joinpath("static", name).read_text(encoding="utf-8")


#: Site paths of the assets an export writes once (a server page inlines them).
ASSETS = ("leaderboard.css", "leaderboard.js")


def _page(title: str, body: str, href: Href, api: str | None = None) -> str:
    """A whole page; ``api`` is the site path of the page's JSON twin (linked at the bottom)."""
    if getattr(href, "linked_assets", False):
        style = f"<link rel='stylesheet' href='{_esc(href('/static/leaderboard.css'))}'>"
        script = f"<script src='{_esc(href('/static/leaderboard.js'))}'></script>"
    else:
        style = f"<style>{_asset('leaderboard.css')}</style>"
        script = f"<script>{_asset('leaderboard.js')}</script>"
    footer = (
        f"<footer class='muted'>JSON: <a class='api' href='{_esc(href(api))}'>{_esc(api)}</a></footer>" if api else ""
    )
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{_esc(title)} - envgym leaderboard</title>{style}</head>"
        f"<body><header><a href='{_esc(href('/'))}'>envgym leaderboard</a></header><main>{body}</main>"
        f"{footer}{script}</body></html>\n"
    )


def matches(query: str | None, *fields: Any) -> bool:
    """Whether a row whose text is ``fields`` is kept by the filter ``query`` (``?q=``): every
    word of the query appears in some field, ignoring case; an empty query keeps every row. The
    pages' filter box (``leaderboard.js``) applies the same rule to a row's text in the browser."""
    words = (query or "").casefold().split()
    text = " ".join(plain(f) for f in fields).casefold()
    return all(word in text for word in words)


def _filter_box(table_id: str, query: str | None, what: str) -> str:
    """A filter box for table ``table_id``: the server filters by ``?q=`` (a form GET, so it
    works without JavaScript), the script then narrows the rows as one types."""
    return (
        f"<form class='filter' method='get' role='search'><label>Filter {_esc(what)} "
        f"<input type='search' name='q' value='{_esc(query or '')}' data-table='{table_id}' "
        f"placeholder='words to match' aria-label='filter {_esc(what)}'></label></form>"
    )


def _num(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _num_cell(value: float | None, digits: int = 3) -> str:
    data = "" if value is None else repr(float(value))
    return f"<td class='num' data-value='{data}'>{_num(value, digits)}</td>"


def _ci_text(row: Mapping[str, Any]) -> str:
    return "-" if row["ci_low"] is None else f"{row['ci_low']:.3f}\u2013{row['ci_high']:.3f}"


def suite_path(suite_id: str) -> str:
    return f"/suites/{quote(suite_id, safe='')}"


def index_page(suites: Sequence[Mapping[str, Any]], href: Href, query: str | None = None) -> str:
    """The list of suites with submissions (those matching ``query``, see :func:`matches`)."""
    if not suites:
        body = (
            "<h1>Suites</h1><p class='muted'>No submissions yet. Submit a bench run with "
            "<code>envgym leaderboard submit RUN --db URL</code> or POST a bundle to <code>/api/submissions</code>.</p>"
        )
        return _page("Suites", body, href, "/api/suites")
    rows = "".join(
        f"<tr><td><a href='{_esc(href(suite_path(s['id'])))}'>{_esc(s['id'])}</a></td><td>{_esc(s['name'])}</td>"
        f"<td>{_esc(s['version'])}</td><td class='num' data-value='{s['submissions']}'>{s['submissions']}</td>"
        f"<td>{_esc(s['best_agent'])}</td>{_num_cell(s['best_success_rate'])}</tr>"
        for s in suites
        if matches(query, s["id"], s["name"], s["version"], s["best_agent"])
    )
    body = (
        f"<h1>Suites</h1>{_filter_box('suites', query, 'suites')}<table class='sortable' id='suites'><thead><tr><th>suite</th><th>name</th><th>version</th>"
        "<th class='num' data-type='num'>submissions</th><th>best agent</th>"
        f"<th class='num' data-type='num'>best success</th></tr></thead><tbody>{rows}</tbody></table>"
    )
    return _page("Suites", body, href, "/api/suites")


def ci_plot(board: Sequence[Mapping[str, Any]]) -> str:
    """An inline SVG: each submission's success rate (dot) and 95 % interval (bar) on [0, 1]."""
    rows = [b for b in board if b["success_rate"] is not None]
    if not rows:
        return ""
    label_w, plot_w, row_h, top = 220, 520, 24, 28
    height = top + row_h * len(rows) + 10

    def x(value: float) -> float:
        return label_w + value * plot_w

    parts = [
        (
            f"<svg xmlns='http://www.w3.org/2000/svg' id='ci-plot' width='{label_w + plot_w + 40}' height='{height}' "
            "role='img' aria-label='success rate with 95% confidence intervals'>"
        )
    ]
    for tick in (0, 0.25, 0.5, 0.75, 1.0):
        parts.append(
            f"<line x1='{x(tick):.1f}' y1='{top - 6}' x2='{x(tick):.1f}' y2='{height - 6}' stroke='#d8dee6'/>"
            f"<text x='{x(tick):.1f}' y='{top - 10}' text-anchor='middle'>{tick:g}</text>"
        )
    for i, row in enumerate(rows):
        y = top + i * row_h + row_h / 2
        name = str(row["agent_name"])
        name = name if len(name) <= 30 else name[:29] + "\u2026"
        parts.append(f"<text x='{label_w - 8}' y='{y + 4:.1f}' text-anchor='end'>{_esc(name)}</text>")
        low, high = row["ci_low"], row["ci_high"]
        if low is not None and high is not None:
            parts.append(
                f"<line x1='{x(low):.1f}' y1='{y:.1f}' x2='{x(high):.1f}' y2='{y:.1f}' stroke='#1f5fbf' stroke-width='3'>"
                f"<title>95% CI {low:.3f} to {high:.3f}</title></line>"
            )
        parts.append(
            f"<circle cx='{x(row['success_rate']):.1f}' cy='{y:.1f}' r='5' fill='#1d232b'>"
            f"<title>{_esc(name)}: {row['success_rate']:.3f}</title></circle>"
        )
    parts.append("</svg>")
    return "".join(parts)


def _submitter(sub: Mapping[str, Any]) -> str:
    """Who uploaded: the name of the token used (never the token), or "anonymous"."""
    return sub.get("submitter") or "anonymous"


def suite_page(suite_id: str, board: Sequence[Mapping[str, Any]], href: Href, query: str | None = None) -> str:
    """A suite's ranked table (the submissions matching ``query``, see :func:`matches`), its CI
    plot, and the per-environment success rates (one row per environment, one column per
    submission: a suite may have dozens of environments, which as columns would not fit a screen)."""
    if not board:
        return _page(suite_id, f"<h1>{_esc(suite_id)}</h1><p class='muted'>No submissions.</p>", href)
    first = board[0]
    entries = [e["entry"] for e in first["entries"]]
    shown = [b for b in board if matches(query, b["agent_name"], _submitter(b), b["agent_spec"])]
    # pass^k up to the trials: a multi-agent entry's pass^k runs on to k = agents x trials (every
    # agent's record is an episode of the task), which the submission page lists.
    most = max(int(b["trials"]) for b in board)
    ks = sorted({k for b in board for k in b["pass_k"] if int(k) <= most}, key=int)
    head = (
        "<th class='num' data-type='num'>rank</th><th data-type='text'>agent</th>"
        "<th class='num' data-type='num'>success</th><th class='num' data-type='num'>95% CI</th>"
        "<th class='num' data-type='num'>mean reward</th>"
        + "".join(f"<th class='num' data-type='num'>pass^{k}</th>" for k in ks)
        + "<th class='num' data-type='num'>infra errors</th><th class='num' data-type='num'>episodes</th>"
        "<th data-type='text'>submitted</th><th data-type='text'>submitted by</th>"
    )
    rows = []
    for b in shown:
        ci = _ci_text(b)
        ci_value = "" if b["ci_low"] is None else repr(b["ci_high"] - b["ci_low"])
        cells = [
            f"<td class='num' data-value='{b['rank']}'>{b['rank']}</td>",
            f"<td class='agent'><a href='{_esc(href('/entries/' + str(b['id'])))}'>{_esc(b['agent_name'])}</a></td>",
            _num_cell(b["success_rate"]),
            f"<td class='num' data-value='{ci_value}'>{ci}</td>",
            _num_cell(b["mean_reward"]),
            *(_num_cell(b["pass_k"].get(k)) for k in ks),
            f"<td class='num' data-value='{b['infra']}'>{b['infra']}</td>",
            f"<td class='num' data-value='{b['episodes']}'>{b['episodes']}</td>",
            f"<td class='date'>{_esc(b['submitted_at'])}</td>",
            f"<td class='submitter'>{_esc(_submitter(b))}</td>",
        ]
        rows.append(f"<tr data-id='{b['id']}'>{''.join(cells)}</tr>")
    per_head = "<th data-type='text'>environment</th>" + "".join(
        f"<th class='num' data-type='num'>{b['rank']}. {_esc(b['agent_name'])}</th>" for b in shown
    )
    rates = [{x["entry"]: x["success_rate"] for x in b["entries"]} for b in shown]
    per_rows = "".join(
        f"<tr><td>{_esc(e)}</td>" + "".join(_num_cell(rate.get(e)) for rate in rates) + "</tr>" for e in entries
    )
    count = f"{len(shown)} of {len(board)} submissions match {query!r}." if query else ""
    body = (
        f"<h1>{_esc(first['suite_name'])} <span class='muted'>v{_esc(first['suite_version'])}</span></h1>"
        f"<p class='muted'>Suite <code>{_esc(suite_id)}</code>. Every number is recomputed by replaying the "
        "submitted actions; success is the mean over environments of the success rate, the interval a 95 % "
        "bootstrap over tasks. Click a header to sort.</p>"
        f"<h2>Success rate with 95% interval</h2>{ci_plot(shown)}"
        f"<h2>Ranking</h2>{_filter_box('board', query, 'submissions')}"
        + (f"<p class='muted'>{_esc(count)}</p>" if count else "")
        + f"<div class='wide'><table class='sortable' id='board'><thead><tr>{head}</tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table></div>"
        "<h2>Success rate per environment</h2>"
        f"<div class='wide'><table class='sortable' id='per-entry'><thead><tr>{per_head}</tr></thead>"
        f"<tbody>{per_rows}</tbody></table></div>"
    )
    return _page(suite_id, body, href, f"/api/suites/{quote(suite_id, safe='')}/entries")


def _episode_link(submission_id: int, ordinal: int) -> str:
    return f"/entries/{submission_id}/episodes/{ordinal}"


def _yes_no(value: bool) -> str:
    return "<span class='yes'>yes</span>" if value else "<span class='no'>no</span>"


def _agent_label(ep: Mapping[str, Any]) -> str:
    """`` agent <id>`` for one agent's record of a multi-agent episode, else nothing."""
    return f" agent {ep['agent_id']}" if ep.get("agent_id") else ""


def joint_returns(episodes: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Per multi-agent entry: the mean over its scored joint episodes (entry, seed, trial) of the
    sum of every agent's return (entries without agent records are left out)."""
    joint: dict[tuple[str, int, int], float] = {}
    for ep in episodes:
        if ep.get("agent_id") and ep["scored"]:
            key = (ep["entry"], ep["seed"], ep["trial"])
            joint[key] = joint.get(key, 0.0) + float(ep["total_reward"])
    sums: dict[str, list[float]] = {}
    for (entry, _, _), value in joint.items():
        sums.setdefault(entry, []).append(value)
    return {entry: math.fsum(values) / len(values) for entry, values in sums.items()}


def submission_page(
    sub: Mapping[str, Any], episodes: Sequence[Mapping[str, Any]], href: Href, query: str | None = None
) -> str:
    """One submission: who, what, scores per environment, and its episodes (one row per agent of a
    multi-agent episode, with the entry's mean joint return; those matching ``query``, see
    :func:`matches`)."""
    meta_rows = [
        ("agent", sub["agent_name"]),
        ("agent spec", sub["agent_spec"]),
        *((f"meta: {k}", v if isinstance(v, str) else json.dumps(v)) for k, v in sub["agent_metadata"].items()),
        ("suite", sub["suite_id"]),
        ("trials per task", sub["trials"]),
        ("success rate", _num(sub["success_rate"])),
        ("95% CI", "-" if sub["ci_low"] is None else f"{sub['ci_low']:.3f} to {sub['ci_high']:.3f}"),
        ("mean reward", _num(sub["mean_reward"])),
        *((f"pass^{k}", _num(v)) for k, v in sorted(sub["pass_k"].items(), key=lambda kv: int(kv[0]))),
        ("episodes", f"{sub['episodes']} ({sub['scored']} scored, {sub['infra']} infrastructure failures)"),
        ("envgym version", sub["envgym_version"]),
        ("git commit", sub["git_commit"] or "-"),
        ("run created", sub["created"]),
        ("submitted", sub["submitted_at"]),
        ("submitted by", _submitter(sub)),
        ("content hash", sub["content_hash"]),
    ]
    meta = "".join(f"<dt>{_esc(k)}</dt><dd>{_esc(v)}</dd>" for k, v in meta_rows)
    joint = joint_returns(episodes)
    multi = any(ep.get("agent_id") for ep in episodes)
    entry_rows = "".join(
        f"<tr><td>{_esc(e['entry'])}</td><td><code>{_esc(e['env_id'])}</code></td>{_num_cell(e['success_rate'])}"
        f"<td class='num'>{_ci_text(e)}</td>"
        f"{_num_cell(e['mean_reward'])}{_num_cell(joint.get(e['entry'])) if joint else ''}{_num_cell(e['mean_turns'], 2)}"
        f"<td class='num'>{e['scored']}/{e['episodes']}</td><td class='num'>{e['infra']}</td></tr>"
        for e in sub["entries"]
    )
    episode_rows = "".join(
        f"<tr><td>{_esc(ep['entry'])}</td><td class='num' data-value='{ep['seed']}'>{ep['seed']}</td>"
        f"<td class='num' data-value='{ep['trial']}'>{ep['trial']}</td>"
        + (f"<td class='agent'>{_esc(ep.get('agent_id') or '')}</td>" if multi else "")
        + f"<td>{_esc(ep['task_id'])}</td>"
        f"<td>{_yes_no(ep['success']) if ep['scored'] else 'unscored'}</td>{_num_cell(ep['total_reward'])}"
        f"<td class='num' data-value='{ep['num_turns']}'>{ep['num_turns']}</td><td>{_esc(ep['termination_reason'])}</td>"
        f"<td><a class='view' href='{_esc(href(_episode_link(sub['id'], ep['ordinal'])))}'>view</a></td></tr>"
        for ep in episodes
        if matches(query, ep["entry"], ep["seed"], ep.get("agent_id"), ep["task_id"], ep["termination_reason"])
    )
    body = (
        f"<p><a href='{_esc(href(suite_path(sub['suite_id'])))}'>\u2190 {_esc(sub['suite_id'])}</a></p>"
        f"<h1>{_esc(sub['agent_name'])}</h1><dl class='meta'>{meta}</dl>"
        "<h2>Per environment</h2><table class='sortable' id='entries'><thead><tr><th data-type='text'>entry</th>"
        "<th data-type='text'>environment</th><th class='num' data-type='num'>success</th><th class='num'>95% CI</th>"
        "<th class='num' data-type='num'>mean reward</th>"
        + ("<th class='num' data-type='num'>mean joint return</th>" if joint else "")
        + "<th class='num' data-type='num'>mean turns</th>"
        "<th class='num'>scored</th><th class='num'>infra</th></tr></thead>"
        f"<tbody>{entry_rows}</tbody></table>"
        f"<h2>Episodes</h2>{_filter_box('episodes', query, 'episodes')}<table class='sortable' id='episodes'><thead><tr><th data-type='text'>entry</th>"
        "<th class='num' data-type='num'>seed</th><th class='num' data-type='num'>trial</th>"
        + ("<th data-type='text'>agent</th>" if multi else "")
        + "<th data-type='text'>task</th>"
        "<th data-type='text'>success</th><th class='num' data-type='num'>reward</th>"
        "<th class='num' data-type='num'>turns</th><th data-type='text'>end</th><th>viewer</th></tr></thead>"
        f"<tbody>{episode_rows}</tbody></table>"
    )
    return _page(sub["agent_name"], body, href, f"/api/entries/{sub['id']}")


_PNG_URI = re.compile(r"data:image/png;base64,[A-Za-z0-9+/]+={0,2}")


def _screenshot(uri: Any, alt: str) -> str:
    """An ``<img>`` of a turn's recorded screen, or nothing: only a base64 PNG ``data:`` URI (what
    bundles carry) is shown, so a submitted record can never point the page elsewhere."""
    if not isinstance(uri, str) or _PNG_URI.fullmatch(uri) is None:
        return ""
    return f"<figure class='screenshot'><img src='{uri}' alt='{_esc(alt)}'></figure>"


def episode_page(
    sub: Mapping[str, Any], episode: Mapping[str, Any], episodes: Sequence[Mapping[str, Any]], href: Href
) -> str:
    """The turn-by-turn viewer of one episode, with a picker for the submission's other episodes.

    For one agent's record of a multi-agent episode the picker lists the joint episodes of its
    entry (each opens its first agent's record) and links lead to the other agents' records of
    this episode: a picker of every record would make each page as long as the submission.
    """
    picked = episode["ordinal"]
    agent_links = ""
    if episode.get("agent_id"):
        current = (episode["seed"], episode["trial"])
        firsts: dict[tuple[int, int], Mapping[str, Any]] = {}
        same: list[Mapping[str, Any]] = []
        for ep in episodes:
            if ep["entry"] == episode["entry"]:
                firsts.setdefault((ep["seed"], ep["trial"]), ep)
                if (ep["seed"], ep["trial"]) == current:
                    same.append(ep)
        picked = firsts[current]["ordinal"] if current in firsts else picked
        episodes = list(firsts.values())
        agent_links = (
            "<p class='agents'>Agents: "
            + " &middot; ".join(
                f"<b>{_esc(ep['agent_id'])}</b>"
                if ep["ordinal"] == episode["ordinal"]
                else f"<a href='{_esc(href(_episode_link(sub['id'], ep['ordinal'])))}'>{_esc(ep['agent_id'])}</a>"
                for ep in same
            )
            + "</p>"
        )
    options = "".join(
        f"<option value='{_esc(href(_episode_link(sub['id'], ep['ordinal'])))}'"
        f"{' selected' if ep['ordinal'] == picked else ''}>"
        f"{_esc(ep['entry'])} seed {ep['seed']} trial {ep['trial']}</option>"
        for ep in episodes
    )
    turns = []
    for i, turn in enumerate(episode["turns"], start=1):  # numbered from 1, as `envgym play` numbers them
        shot = _screenshot(turn.get("screenshot"), f"the screen before turn {i}")
        components = ", ".join(f"{k} {v:g}" for k, v in sorted(turn["reward_components"].items()))
        completion = (
            f"<div class='completion'><b>completion</b><pre>{_esc(turn.get('completion'))}</pre></div>"
            if turn.get("completion") is not None
            else ""
        )
        flags = [f for f, on in (("invalid", not turn["action_valid"]), ("terminated", turn["terminated"]),
                                 ("truncated", turn["truncated"])) if on]  # fmt: skip
        turns.append(
            f"<section class='turn' id='turn-{i}'><h3>Turn {i}{' (' + ', '.join(flags) + ')' if flags else ''}</h3>"
            f"{shot}<div class='observation'><b>observation</b><pre>{_esc(turn.get('observation'))}</pre></div>{completion}"
            f"<p><b>action</b> <code class='action'>{_esc(turn['action'])}</code> &nbsp; <b>reward</b> "
            f"<span class='reward'>{turn['reward']:g}</span> <span class='muted'>({_esc(components)})</span></p></section>"
        )
    errors = "".join(f"<li>{_esc(e)}</li>" for e in episode.get("errors") or [])
    status = _yes_no(episode["success"]) if episode["scored"] else "unscored (infrastructure failure)"
    body = (
        f"<p><a href='{_esc(href('/entries/' + str(sub['id'])))}'>\u2190 {_esc(sub['agent_name'])}</a></p>"
        f"<h1>{_esc(episode['entry'])} seed {episode['seed']} trial {episode['trial']}{_esc(_agent_label(episode))}</h1>"
        f"<p><label>Episode <select id='episode-picker'>{options}</select></label></p>{agent_links}"
        f"<p>task <code>{_esc(episode['task_id'])}</code> &middot; success {status} &middot; reward "
        f"{episode['total_reward']:g} &middot; {episode['num_turns']} turns &middot; ended by "
        f"{_esc(episode['termination_reason'])}</p>"
        + (f"<h2>Errors</h2><ul>{errors}</ul>" if errors else "")
        + "".join(turns)
        + "<section class='turn' id='final'><h3>Final observation</h3>"
        + _screenshot(episode.get("final_screenshot"), "the screen after the last turn")
        + f"<pre>{_esc(episode.get('final_observation'))}</pre></section>"
    )
    return _page(
        f"{episode['entry']} seed {episode['seed']}",
        body,
        href,
        f"/api/entries/{sub['id']}/episodes/{episode['ordinal']}",
    )


# -- static export ---------------------------------------------------------------------------------


def export_file(site_path: str) -> str:
    """The file (relative to an export's root) that holds ``site_path``.

    Pages become ``.html`` files (``/`` is ``index.html``), API documents ``.json`` files
    (``/api/suites`` is ``api/suites.json``), and assets keep their names (``static/...``).
    """
    if site_path == "/":
        return "index.html"
    path = site_path.strip("/")
    if path.startswith("static/"):
        return path
    return path + (".json" if path.startswith("api/") else ".html")


class _RelativeHref:
    """The ``href`` of an exported page: a site path as a link relative to the page's own file."""

    linked_assets = True  # pages link static/leaderboard.{css,js} instead of inlining them

    def __init__(self, page_file: str) -> None:
        self.start = os.path.dirname(page_file) or "."

    def __call__(self, link: str) -> str:
        return Path(os.path.relpath(export_file(link), start=self.start)).as_posix()


def export_site(store: Any, out: str | os.PathLike[str]) -> list[Path]:
    """Write the leaderboard of ``store`` (a :class:`~envgym.leaderboard.store.Store`) as static files.

    Under ``out``: ``index.html``, ``suites/<id>.html``, ``entries/<n>.html`` and
    ``entries/<n>/episodes/<k>.html``; the JSON API as it would be served
    (``api/suites.json``, ``api/suites/<id>/entries.json``, ``api/entries/<n>.json``,
    ``api/entries/<n>/episodes.json`` and ``api/entries/<n>/episodes/<k>.json``); and
    ``static/leaderboard.css`` and ``static/leaderboard.js``. Links are relative, so the folder
    works opened from disk or served as is. Files of an earlier export that this one does not
    write are left alone. Returns the files written, in order.
    """
    root = Path(out)
    written: list[Path] = []

    def put(target: str, text: str) -> None:
        file = root / target
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(text, encoding="utf-8")
        written.append(file)

    def page(site_path: str, render: Callable[[Href], str]) -> None:
        target = export_file(site_path)
        put(target, render(_RelativeHref(target)))

    def api(site_path: str, document: Any) -> None:
        text = json.dumps(document, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        put(export_file(site_path), text + "\n")

    for name in ASSETS:
        put(f"static/{name}", _asset(name))
    suites = store.suites()
    page("/", lambda href: index_page(suites, href))
    api("/api/suites", suites)
    for suite in suites:
        board = store.leaderboard(suite["id"])
        page(suite_path(suite["id"]), lambda href, s=suite, b=board: suite_page(s["id"], b, href))
        api(f"/api/suites/{quote(suite['id'], safe='')}/entries", board)
        for row in board:
            sub = store.submission(row["id"])
            listed = store.episodes(row["id"])
            page(f"/entries/{row['id']}", lambda href, s=sub, e=listed: submission_page(s, e, href))
            api(f"/api/entries/{row['id']}", sub)
            api(f"/api/entries/{row['id']}/episodes", listed)
            for ep in listed:
                full = store.episode(row["id"], ep["ordinal"])
                page(
                    _episode_link(row["id"], ep["ordinal"]),
                    lambda href, s=sub, f=full, e=listed: episode_page(s, f, e, href),
                )
                api(f"/api/entries/{row['id']}/episodes/{ep['ordinal']}", full)
    return written
