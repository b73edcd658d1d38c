import DequeModule
import EdgeCore
import FleetcastCore
import OutboxCore

/// The outbox's fallback store when no database can be used (a read-only or full state
/// directory, a store that cannot be created): the same rules as the SQLite store, in memory,
/// bounded by its byte limit. Nothing in it survives a restart; the status says `degraded`.
package final class MemoryOutboxStorage: OutboxStorage {
    package let location = "memory"
    private struct Contents {
        package var records: Deque<OutboxRecord> = []
        package var bytes = 0
    }
    private let contents = SanitizerVisibleMutex(Contents())

    package init() {}

    package func commit(_ batch: OutboxCommit) async throws -> OutboxCommitResult {
        contents.withLock { contents in
            var result = OutboxCommitResult(count: 0, bytes: 0)
            if !batch.deletes.isEmpty {
                let deletes = Set(batch.deletes)
                contents.records.removeAll { record in
                    guard deletes.contains(record.seq) else { return false }
                    contents.bytes -= record.accountedBytes
                    return true
                }
            }
            for record in batch.inserts {
                // Inserts come in rising seq order, after every stored record.
                if let last = contents.records.last, last.seq >= record.seq {
                    guard !contents.records.contains(where: { $0.seq == record.seq }) else { continue }
                    let index = contents.records.firstIndex { $0.seq > record.seq } ?? contents.records.endIndex
                    contents.records.insert(record, at: index)
                } else {
                    contents.records.append(record)
                }
                contents.bytes += record.accountedBytes
            }
            contents.records.removeAll { record in
                // Not one on its way to the broker: delivered, it is no loss.
                guard record.storedAtMilliseconds < batch.expiresBeforeMilliseconds, !batch.protected.contains(record.seq) else {
                    return false
                }
                contents.bytes -= record.accountedBytes
                result.expired += 1
                return true
            }
            // Size limit: the oldest headings first, then the oldest fixes; chosen in one pass
            // each and removed together (linear, under the lock).
            for kind in [OutboundMessage.Kind.heading, .fix] where contents.bytes > batch.maximumBytes {
                var doomed = Set<UInt64>()
                for record in contents.records where contents.bytes > batch.maximumBytes {
                    guard record.kind == kind, !batch.protected.contains(record.seq) else { continue }
                    doomed.insert(record.seq)
                    contents.bytes -= record.accountedBytes
                }
                if !doomed.isEmpty {
                    contents.records.removeAll { doomed.contains($0.seq) }
                    result.full += UInt64(doomed.count)
                }
            }
            result.count = contents.records.count
            result.bytes = contents.bytes
            return result
        }
    }

    package func backlog(after: UInt64, limit: Int, maximumBytes: Int, excluding: Set<UInt64>) async throws -> [OutboxRecord] {
        contents.withLock { contents in
            var records: [OutboxRecord] = []
            var total = 0
            // Records are in seq order: skip to the first after `after`.
            var low = contents.records.startIndex
            var high = contents.records.endIndex
            while low < high {
                let mid = (low + high) / 2
                if contents.records[mid].seq <= after { low = mid + 1 } else { high = mid }
            }
            var index = low
            while records.count < limit, index < contents.records.endIndex {
                let record = contents.records[index]
                index += 1
                if excluding.contains(record.seq) { continue }
                if !records.isEmpty, total + record.payload.count > maximumBytes { break }
                total += record.payload.count
                records.append(record)
            }
            return records
        }
    }
}
