"""What the dataset browser shows (Qt-free): its column arrays (`browse_data`), the counts behind its charts
(`prediction_counts`: confusion matrix, per-class accuracy, confidence order) and the CEI distribution of a stored
run (`run_cei`)."""
