import OutboxCore
import Testing

/// The outbox's parts on their own: the link's phases, the commit in progress, batched mode's
/// flushes and the backlog drain's cursor, each driven with plain values.
@Suite("Outbox phases")
struct OutboxPhasesTests {
    @Test("the link: a connection's status goes first, and a reconnect that brings none still owes the lost one's")
    func linkPhases() {
        var link = OutboxLinkPhase.unreported
        #expect(!link.isReported && !link.isDown && !link.owesStatus, "a sender that reports nothing: taken to be up")
        link.lost()
        #expect(link == .down(statusOwed: false) && link.isDown && link.isReported)
        link.connected(statusFirst: true)
        #expect(link == .awaitingStatus && link.owesStatus && !link.isDown)
        link.lost()
        #expect(link == .down(statusOwed: true) && link.owesStatus, "lost before its status went: still owed")
        link.connected(statusFirst: false)
        #expect(link == .awaitingStatus, "no new status coming (stopping): the owed one still goes first")
        link.statusHandedOut()
        #expect(link == .up && !link.owesStatus)
        link.statusHandedOut()
        #expect(link == .up, "a later status changes nothing")
        link.lost()
        link.connected(statusFirst: false)
        #expect(link == .up, "nothing owed, none coming")
    }

    @Test("the commit: ending it hands back what it carried, once; an idle one carries nothing")
    func commitPhase() {
        var phase = OutboxCommitPhase.idle
        #expect(phase.inFlight == nil && phase.records.isEmpty && phase.deleting.isEmpty)
        let record = OutboxRecord(seq: 7, kind: .fix, storedAtMilliseconds: 0, payload: [])
        phase = .writing(.init(records: [record], deleting: [3, 4], carriesFlush: true))
        #expect(phase.records.map(\.seq) == [7] && phase.deleting == [3, 4])
        let ended = phase.end()
        #expect(ended.records.map(\.seq) == [7] && ended.deleting == [3, 4] && ended.carriesFlush)
        #expect(phase.inFlight == nil, "over")
        let again = phase.end()
        #expect(again.records.isEmpty && again.deleting.isEmpty && !again.carriesFlush)
    }

    @Test("a flush: taken by one commit only, readable below the commit's number once it is over")
    func flush() {
        var flush = OutboxFlush()
        let none = flush.take()
        #expect(!none, "none asked for")
        flush.request()
        #expect(flush.requested)
        let first = flush.take(), second = flush.take()
        #expect(first, "the next commit carries it")
        #expect(!flush.requested && !second, "and no other")
        flush.completed(below: 10)
        #expect(flush.below == 10 && flush.generation == 1)
        flush.completed(below: 4)
        #expect(flush.below == 10 && flush.generation == 2, "never back")
    }

    @Test("the cursor: past what was sent, back before a failed batch, and not past a record that joined the backlog during a read")
    func backlogCursor() {
        var cursor = OutboxBacklogCursor()
        var read = cursor.read()
        #expect(read == 0)
        cursor.sending([1, 2, 3])
        read = cursor.read()
        #expect(read == nil, "a batch is on its way")
        let sent = cursor.finished()
        #expect(sent == [1, 2, 3])
        read = cursor.read()
        #expect(read == 3)
        cursor.sending([4, 5])
        cursor.failed()
        read = cursor.read()
        #expect(cursor.inFlight == nil && read == 3, "back before the failed batch")
        // A record live during the read (so the read skipped it) joins the backlog meanwhile.
        cursor.rewind(before: 2)
        cursor.sending([4, 5, 6])
        #expect(cursor.position == 1, "not past record 2, which the read skipped")
        _ = cursor.finished()
        read = cursor.read()
        #expect(read == 1)
        cursor.sending([2])
        #expect(cursor.position == 2, "a rewind before the last read does not hold the next one back")
    }
}
