-- name: ReplicaReplayPosition :one
-- Where a read replica's replay stands, asked of the replica alone so
-- that watching it costs the primary nothing. Positions are WAL byte
-- offsets: received is what the WAL receiver got from the primary, -1
-- when nothing streams (a server that is not a standby, or one restoring
-- from an archive); replayed is what queries see, -1 when not a standby.
-- replay_age_s is how long ago the last replayed transaction committed
-- (-1: none replayed since the standby started): it grows on an idle
-- primary too, so it says something only while received > replayed, or
-- when nothing streams. receiver is the WAL receiver's status
-- ('streaming' while the primary feeds it), '' when there is none.
SELECT pg_is_in_recovery()::boolean AS in_recovery,
       coalesce((pg_last_wal_receive_lsn() - '0/0'::pg_lsn)::bigint, -1)::bigint AS received,
       coalesce((pg_last_wal_replay_lsn() - '0/0'::pg_lsn)::bigint, -1)::bigint AS replayed,
       coalesce(extract(epoch FROM clock_timestamp() - pg_last_xact_replay_timestamp()), -1)::float8 AS replay_age_s,
       coalesce((SELECT r.status FROM pg_stat_get_wal_receiver() AS r), '')::text AS receiver;
