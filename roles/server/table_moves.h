// Moving embedding-table rows between servers while the job runs: the
// tables' part of a live change of the server set (roles/worker/grow.h), as
// roles/server/handoff.h is the dense partitions'.
//
// Rows are placed by a consistent hash of their id over the server count
// (comm/ps/row_placement.h), so a change of the count moves only the rows
// whose server changes: a server that joins a job of n takes 1/(n+1) of the
// rows, all from the others; when the last of n leaves, only its rows move.
//
// At the step boundary where the servers change, no worker is pulling or
// pushing (the workers wait at a barrier; a prefetch of rows has finished).
// There the chief worker:
//   1. RowsHandOffRequest(servers M, rank) to each server that gives rows up
//      (on a growth every old server; on a shrink the leavers, rank -1, and
//      a server above M that takes a leaver's rank below it): it takes out
//      every row a placement over M puts elsewhere, wherever it lives
//      (memory or disk), with its optimizer state, last-touched step and
//      update count, and answers RowsHandOffReply + the rows
//      (roles/placement/row_move_codec.h) and the steps its tables applied;
//   2. RowsTakeOverRequest(servers M, step, rank) + the rows meant for it to
//      each server that takes rows (the joiners; on a shrink every server
//      that stays, with no rows when none are its): it holds `rank` from
//      now on (its checkpoint shards are named by it), checks each row
//      belongs to it over M, installs them (a tiered table writes those past its
//      memory budget to its own disk: rows are read and written, not
//      ingested as store files, as the moving rows are scattered over the
//      store's key order), and a joiner's tables start at `step`.
// From then on each of them refuses a pull or push placed over another
// count (SparsePullRequest.servers), and the workers place rows over M.
// A row leaves one server before it reaches the next, and the chief holds
// it in between: if the chief fails there, the job recovers as from any
// lost node, from its newest checkpoint.
//
// Copied ahead (RowsPhase, roles/worker/rows_ahead.h). Before that step,
// while the job trains, the chief runs the same two requests in phase
// kCopy: a server giving rows up copies those of its tables held all in
// memory (a tiered table's move whole at the step) and from then on marks
// each copied id that is pulled or changed by an applied push; a server
// taking rows checks them and holds them aside, or installs them at once
// when it places rows over M already (a joiner: nothing reaches its tables
// before the step) and its tables have no max_rows. At the step, in phase
// kDelta, a server giving rows up still takes every moving row out but
// sends only those not copied or marked since, with the ids of copied rows
// it no longer has (evicted, marked or not: "gone"); the taker drops its
// copies of both and installs the rest. A delta with no copy behind it is
// refused on either side, and a whole move (kWhole) drops a copy first.
//
// Pending admissions (ids seen fewer than admit_after times, with no row
// yet) stay where they were counted: such an id starts counting again on
// its new server.
//
// RowsDigestRequest: a fingerprint of every table's rows (count and an
// order-independent hash of each row's values and state), which the chief
// compares before and after the moves when PSTRAIN_TEST_CHECK_MOVES is set
// (tests/elastic_test.sh): every row that existed before exists after,
// with the same values and optimizer state.
#pragma once
