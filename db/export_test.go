package db

// JobClaimLimitedAnySQL is the statement, for tests of its plan.
const JobClaimLimitedAnySQL = jobClaimLimitedAny
