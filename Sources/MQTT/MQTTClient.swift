// The async MQTT client over libmosquitto lands here (issue 3).
import CMosquitto
