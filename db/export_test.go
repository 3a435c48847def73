package db

// JobClaimLimitedAnySQL is the statement, for tests of its plan.
const JobClaimLimitedAnySQL = jobClaimLimitedAny

// JobClaimSQL is the claim statement, for tests of its plan.
const JobClaimSQL = jobClaim

// JobClaimLimitedSQL is the limited claim statement, for tests of its plan.
const JobClaimLimitedSQL = jobClaimLimited
