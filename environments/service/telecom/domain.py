"""The telecom domain (its card is :class:`TelecomDomain`'s docstring)."""

from __future__ import annotations

import random
from typing import Any

from envgym.environments.service.core import Domain, ServiceTask, Tool, ToolCall, World
from envgym.environments.service.telecom import tasks
from envgym.environments.service.telecom.tools import MAX_REFUEL_GB, POLICY, _agent_tools, _overdue, _user_tools
from envgym.environments.service.telecom.user import TelecomUser

__all__ = ["TelecomDomain"]


class TelecomDomain(Domain):
    """Telecom support with dual control: the agent guides the user on their own phone (tau2-bench style).

    **World.** The carrier's database (``world.db``): four plans (data allowance, monthly price,
    refuel price per GB, roaming price per day), 6 to 10 customers with 1 to 3 lines each (status
    active or suspended, plan, data used this cycle, refuel this cycle, roaming on the line, cycle
    end date) and their bills (paid, open or overdue), and refuel charges. The user's phone
    (``world.device``): airplane mode, mobile data, data roaming, data saver, network mode
    preference (2G to 5G), APN (name, MMSC, a reset pending a restart), SIM (active, missing,
    locked), signal and location (home or a country abroad). Service, data and speed are computed
    from both (:func:`has_service`, :func:`data_works`, :func:`speed_mbps`).

    **Agent tools.** Reads: ``get_customer_by_phone``, ``get_customer_details``,
    ``get_line_details``, ``get_plan_details``, ``list_plans``, ``get_bills``. Writes:
    ``pay_bill``, ``resume_line``, ``refuel_data``, ``change_plan``, ``enable_roaming``,
    ``disable_roaming``. **User tools** (the phone; the user calls them when asked):
    ``check_status_bar``, ``check_network_status``, ``check_sim_status``, ``check_apn_settings``,
    ``run_speed_test``, ``toggle_airplane_mode``, ``toggle_data``, ``toggle_roaming``,
    ``toggle_data_saver``, ``set_network_mode_preference``, ``reset_apn_settings``,
    ``reseat_sim_card``, ``reboot_device``.

    **Policy** (:data:`POLICY`; rules the tools do not enforce are :meth:`violations`): identify
    the customer by the line's number and name; explain and get a yes before a change; resume a
    suspended line only once no bill is overdue; never waive bills; refuel at most 2 GB per cycle,
    and refuels, plan changes and roaming only on an active line of an account with nothing
    overdue; pay only overdue bills; locked SIMs go to a store; fix only what causes the problem.

    **Task kinds** (the root causes are drawn with the world; the user's choices with the task):
    ``no_service`` (airplane mode, SIM not detected, line suspended for a bill the user pays),
    ``mobile_data`` (also data off, a wrong APN needing a reset and a restart), ``data_refuel`` and
    ``plan_change`` (allowance used up: a refuel of the size the user wants, or the plan they
    name), ``slow_data`` (network mode 2G/3G, data saver), ``roaming`` (abroad: roaming off on the
    line and/or the phone, data off, airplane mode), and refusals that change nothing:
    ``refuse_waive_bill`` (the user will not pay and asks for a waiver: tell the overdue amount),
    ``refuse_refuel_limit`` (2 GB already refuelled: tell the cycle end date), ``sim_locked``
    (tell them to bring a photo ID to a store). Half the users give their number in the opening
    message; the others only when asked. Gold actions mix agent calls and user calls
    (``requestor="user"``); the prices the user must hear are ``communicate_info``.

    **User** (:class:`~.TelecomUser`): gives the number and name when asked, follows
    instructions on the phone (airplane mode, data, roaming, data saver, network mode, APN reset,
    SIM reseat, restart, checks, speed test) through the user tools and says what they see, answers
    confirmations (yes, except the user who wants a waiver), says which refuel or plan they want,
    and ends the call only when the problem is really fixed on the phone (or, in a refusal, when
    told the reason).
    """

    name = "telecom"
    title = "a mobile phone carrier"
    policy = POLICY

    def tools(self) -> list[Tool]:
        return _agent_tools()

    def user_tools(self) -> list[Tool]:
        return _user_tools()

    def make_world(self, rng: random.Random) -> World:
        return tasks.make_world(rng)

    def make_task(self, world: World, rng: random.Random) -> ServiceTask:
        return tasks.make_task(world, rng)

    def make_user(self, task: ServiceTask) -> Any:
        return TelecomUser(task, self)

    def violations(self, before: World, call: ToolCall, result: Any) -> list[str]:
        db, args, out = before.db, call.arguments, []
        line = db["lines"].get(args.get("line_id", ""))
        if call.name == "pay_bill":
            bill = db["bills"][args["bill_id"]]
            if bill["status"] != "overdue":
                out.append(f"paid bill {bill['bill_id']}, which is {bill['status']}, not overdue")
            return out
        if line is None:
            return out
        overdue = _overdue(db, line["customer_id"])
        if call.name == "resume_line" and overdue:
            out.append(f"resumed line {line['line_id']} while bill {overdue[0]['bill_id']} is overdue")
        if call.name in ("refuel_data", "change_plan", "enable_roaming"):
            if line["status"] != "active":
                out.append(f"{call.name} on line {line['line_id']}, which is {line['status']}")
            if overdue:
                out.append(f"{call.name} while bill {overdue[0]['bill_id']} is overdue")
        if call.name == "refuel_data" and line["data_refuel_gb"] + args["data_gb"] > MAX_REFUEL_GB:
            out.append(f"refuelled {args['data_gb']} GB on top of {line['data_refuel_gb']} GB (limit {MAX_REFUEL_GB})")
        return out
