// The NMEA 0183 decoder lands here (issue 2).
import GNSS
