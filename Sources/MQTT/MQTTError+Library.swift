import CMosquitto
import MQTTCore

extension MQTTError {
    /// libmosquitto's text for one of its `MOSQ_ERR_*` codes.
    static func libraryMessage(_ code: Int32) -> String {
        String(cString: mosquitto_strerror(code))
    }
}
