"""The eight agent tools the SQaLe models were trained with."""
