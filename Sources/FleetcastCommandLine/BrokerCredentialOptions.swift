import ArgumentParser

/// The command-line options with which `fleetcast-agent` and `fleet-watch` prove who they are
/// to the broker and decide whom to trust: the password file and the TLS files, all PEM paths.
/// One declaration, so both programs name, explain and order them the same way.
///
/// Nothing here is checked at parse time: the agent merges these with its configuration file
/// and environment before it checks them (a key file may come from the file, its certificate
/// from a flag); fleet-watch checks them in its own `validate()`.
public struct BrokerCredentialOptions: ParsableArguments, Sendable {
    @Option(help: "File whose first line is the broker password; a password is never taken on the command line.")
    public var passwordFile: String?

    @Option(help: "PEM file of the CA that signs the broker's certificate (mqtts).")
    public var caFile: String?

    @Option(help: "PEM client certificate, for brokers that ask for one (mqtts with client authentication).")
    public var certFile: String?

    @Option(help: "PEM private key of the client certificate.")
    public var keyFile: String?

    /// No options given.
    public init() {}
}
