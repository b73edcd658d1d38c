// What the client state's transitions return, for the caller to do outside the lock.
extension MQTTClientState {
    /// What the caller must do after a transition, outside the lock.
    struct Actions {
        /// Waits that succeed.
        var succeed: [Ack] = []
        /// Waits that fail with the error.
        var fail: [(Ack, MQTTError)] = []
        /// Waits ended by their task's cancellation (`CancellationError`).
        var cancel: [Ack] = []
        /// Connection states to yield to observers.
        var notify: [(Observer, MQTTConnectionState)] = []
        /// Observers to finish (after their last state).
        var finishObservers: [Observer] = []
        /// Subscription streams to finish, with the error when one ended them.
        var finishStreams: [(Sink, MQTTError?)] = []
        /// `shutdown()` steps to resume.
        var resume: [Waiter] = []
    }

    /// What ``startConnect(_:cancelled:)`` asks for.
    enum ConnectAction {
        /// Start the loop thread; the wait is stored.
        case startLoop
        /// Fail the wait now (``Actions`` carry nothing).
        case refuse(MQTTError)
        /// The task was already cancelled: the client closed; run the ``Actions``.
        case cancelled
    }

    /// What ``addObserver(_:_:seen:)`` did.
    enum ObserverAction {
        /// Stored: every later state reaches it, in order, from the transitions.
        case stored
        /// Not stored: the state changed since `seen`. Yield this one and add again with it
        /// as `seen` (so no later state can overtake it).
        case changed(MQTTConnectionState)
        /// The client is closed: finish the stream (after yielding `.closed` if not seen).
        case finish(yield: MQTTConnectionState?)
    }
}

extension MQTTClientState.Actions: Sendable where Ack: Sendable, Sink: Sendable, Observer: Sendable, Waiter: Sendable {}
