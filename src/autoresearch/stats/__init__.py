"""The statistics: decision rules, robust estimates, calibration, `auto`, paired gains and
the sample book. Pure: nothing here imports anything else of the package."""
