"""The retail domain of the customer-service family: :mod:`.domain` (the domain, its card),
:mod:`.tools` (its tools, policy and policy checks) and :mod:`.tasks` (worlds, tasks, the user)."""
