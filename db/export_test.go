package db

// JobClaimLimitedAnySQL is the statement, for tests of its plan.
const JobClaimLimitedAnySQL = jobClaimLimitedAny

// JobClaimSQL is the claim statement, for tests of its plan.
const JobClaimSQL = jobClaim

// JobClaimLimitedSQL is the limited claim statement, for tests of its plan.
const JobClaimLimitedSQL = jobClaimLimited

// JobClaimLimitedLockSQL is the limited claim's first statement, for tests
// of its plan.
const JobClaimLimitedLockSQL = jobClaimLimitedLock

// JobClaimRatedLockSQL is the rate-limited claim's first statement, for
// tests of its plan.
const JobClaimRatedLockSQL = jobClaimRatedLock
