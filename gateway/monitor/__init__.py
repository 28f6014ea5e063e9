"""`lastmile monitor`: the one place where windowed, label-dependent and paired metrics are computed."""
