"""The telecom domain of the customer-service family (dual control): :mod:`.domain` (the domain,
its card), :mod:`.tools` (the carrier's and the phone's tools, the policy), :mod:`.tasks` (worlds
and tasks) and :mod:`.user` (the scripted user acting on their phone)."""
