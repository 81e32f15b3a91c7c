"""The MiniWoB++ ids of the gui family (data only: string entry points, no env code imported)."""

from __future__ import annotations

from envgym.registration import EnvSpec

_MINIWOB = "envgym.environments.gui.miniwob.env:MiniWoBEnv"

#: Every task page of miniwob 1.1.0 (html/miniwob/<task>.html) that runs here.
MINIWOB_TASKS: tuple[str, ...] = (
    'ascending-numbers', 'bisect-angle', 'book-flight-nodelay', 'book-flight', 'button-delay', 'buy-ticket',
    'chase-circle', 'choose-date-easy', 'choose-date-medium', 'choose-date-nodelay', 'choose-date', 'choose-list',
    'circle-center', 'click-button-sequence', 'click-button', 'click-checkboxes-large', 'click-checkboxes-soft',
    'click-checkboxes-transfer', 'click-checkboxes', 'click-collapsible-2-nodelay', 'click-collapsible-2',
    'click-collapsible-nodelay', 'click-collapsible', 'click-color', 'click-dialog-2', 'click-dialog', 'click-link',
    'click-menu-2', 'click-menu', 'click-option', 'click-pie-nodelay', 'click-pie', 'click-scroll-list',
    'click-shades', 'click-shape', 'click-tab-2-easy', 'click-tab-2-hard', 'click-tab-2-medium', 'click-tab-2',
    'click-tab', 'click-test-2', 'click-test-transfer', 'click-test', 'click-widget', 'copy-paste-2', 'copy-paste',
    'count-shape', 'count-sides', 'daily-calendar', 'drag-box', 'drag-circle', 'drag-cube', 'drag-items-grid',
    'drag-items', 'drag-shapes-2', 'drag-shapes', 'drag-single-shape', 'drag-sort-numbers', 'draw-circle',
    'draw-line', 'email-inbox-delete', 'email-inbox-forward-nl-turk', 'email-inbox-forward-nl',
    'email-inbox-forward', 'email-inbox-important', 'email-inbox-nl-turk', 'email-inbox-noscroll',
    'email-inbox-reply', 'email-inbox-star-reply', 'email-inbox', 'enter-date', 'enter-password', 'enter-text-2',
    'enter-text-dynamic', 'enter-text', 'enter-time', 'find-greatest', 'find-midpoint', 'find-word', 'focus-text-2',
    'focus-text', 'form-sequence-2', 'form-sequence-3', 'form-sequence', 'generate-number', 'grid-coordinate',
    'guess-number', 'highlight-text-2', 'highlight-text', 'hot-cold', 'hover-shape', 'identify-shape',
    'login-user-popup', 'login-user', 'moving-items', 'multi-layouts', 'multi-orderings', 'navigate-tree',
    'number-checkboxes', 'odd-or-even', 'order-food', 'phone-book', 'read-table-2', 'read-table', 'resize-textarea',
    'right-angle', 'scroll-text-2', 'scroll-text', 'search-engine', 'sign-agreement', 'simon-says', 'simple-algebra',
    'simple-arithmetic', 'social-media-all', 'social-media-some', 'social-media', 'stock-market', 'terminal',
    'text-editor', 'text-transform', 'tic-tac-toe', 'unicode-test', 'use-autocomplete-nodelay', 'use-autocomplete',
    'use-colorwheel-2', 'use-colorwheel', 'use-slider-2', 'use-slider', 'use-spinner', 'visual-addition',
)

#: Task sets of the package that are not registered, with the reason.
EXCLUDED: dict[str, str] = {
    "flight.AA": "FlightWoB: a frozen airline site in an iframe wrapper served over HTTP; not a MiniWoB task page",
    "flight.Alaska": "FlightWoB: a frozen airline site in an iframe wrapper served over HTTP; follows an external link",
    "flight.Alaska-auto": "FlightWoB: as flight.Alaska, with auto-generated instructions",
}


def _title(task: str) -> str:
    return task.replace("-", " ")


MINIWOB_SPECS: list[EnvSpec] = [
    EnvSpec(
        id=f"envgym/MiniWoB-{task}-v0",
        entry_point=_MINIWOB,
        family="gui",
        summary=f"MiniWoB++ {_title(task)}: web task in Chromium, accessibility-tree text (needs envgym[gui])",
        kwargs={"task": task, "render_mode": "rgb_array"},
    )
    for task in MINIWOB_TASKS
]
