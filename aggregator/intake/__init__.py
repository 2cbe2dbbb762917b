"""The one door into the live state: agent facts, cluster facts, replica tails, restore."""
