import Testing

/// Tests that start real processes (socat, gpsfake and gpsd) or play recordings run one at a
/// time, to keep the load they add to the package's parallel test run small. Their leak
/// checks look only at what one source owns, so they do not depend on this.
@Suite(.serialized) enum LiveSourceTests {}
