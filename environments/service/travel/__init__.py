"""The travel (airline) domain of the customer-service family: :mod:`.domain` (the domain, its card,
the scripted user), :mod:`.tools` (tools, policy and policy checks) and :mod:`.tasks` (worlds and
tasks)."""
