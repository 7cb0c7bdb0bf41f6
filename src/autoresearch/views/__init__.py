"""What people look at: terminal lines, the live view, reports, the dashboard, MLflow."""
