// What the client state's transitions return, for the caller to do outside the lock.
extension MQTTClientState {
    /// What the caller must do after a transition, outside the lock.
    package struct Actions {
        /// Waits that succeed.
        package var succeed: [Ack] = []
        /// Waits that fail with the error.
        package var fail: [(Ack, MQTTError)] = []
        /// Waits ended by their task's cancellation (`CancellationError`).
        package var cancel: [Ack] = []
        /// Connection states to yield to observers.
        package var notify: [(Observer, MQTTConnectionState)] = []
        /// Observers to finish (after their last state).
        package var finishObservers: [Observer] = []
        /// Subscription streams to finish, with the error when one ended them.
        package var finishStreams: [(Sink, MQTTError?)] = []
        /// `shutdown()` steps to resume.
        package var resume: [Waiter] = []
    }

    /// What ``startConnect(_:cancelled:)`` asks for.
    package enum ConnectAction {
        /// Start the loop thread; the wait is stored.
        case startLoop
        /// Fail the wait now (``Actions`` carry nothing).
        case refuse(MQTTError)
        /// The task was already cancelled: the client closed; run the ``Actions``.
        case cancelled
    }

    /// What ``addObserver(_:_:seen:)`` did.
    package enum ObserverAction {
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
