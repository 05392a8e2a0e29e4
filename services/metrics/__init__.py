"""What Cairn's processes tell Prometheus: the events they count (`events`) and how a
process serves them (`exposition`). The fleet's state, read from the database at each
scrape, is `services.fleet`."""
