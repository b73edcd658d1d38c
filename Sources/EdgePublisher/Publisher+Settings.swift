import EdgeCore

extension Publisher {
    /// What the publisher publishes and how (``EdgeCore/PublisherSettings``): a plain value the
    /// configuration builds without depending on the publisher.
    public typealias Settings = PublisherSettings
}
