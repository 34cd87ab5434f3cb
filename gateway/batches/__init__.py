"""The Batch API (issue 23, part 1). So far only its tables (`schema`); the routes, the runner that
submits to the providers' batch APIs or runs self-hosted items in the fleet's idle capacity, and the
settlement into the ledger and budgets are still to come."""
