DROP FUNCTION IF EXISTS lease_token_next(bigint, bigint);
DROP FUNCTION IF EXISTS lease_token_seed();
