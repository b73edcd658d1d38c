// Serial, gpsd, replay and simulated sources land here (issue 2).
import GNSS
