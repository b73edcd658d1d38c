import Testing

/// Tests that open descriptors, start processes or count `/proc/self/fd` run one at a time,
/// so that one test's descriptors never show up in another's count.
@Suite(.serialized) enum LiveSourceTests {}
