"""How the admin console and the portal show dates and times: one format for both, to the
minute, as Corral's messages write them ("2026-11-29 05:41"). Pages that tell steps apart by
the second (a job's journal and times) add the seconds: "Y-m-d H:i:s"."""

DATE_FORMAT = "Y-m-d"
TIME_FORMAT = "H:i"
DATETIME_FORMAT = "Y-m-d H:i"
SHORT_DATE_FORMAT = "Y-m-d"
SHORT_DATETIME_FORMAT = "Y-m-d H:i"
